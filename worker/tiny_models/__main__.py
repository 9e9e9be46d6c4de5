"""`python -m worker.tiny_models --arch ARCH --size SIZE`: build (or reuse) one, print its path."""

import sys

from worker.tiny_models.build import main

sys.exit(main())

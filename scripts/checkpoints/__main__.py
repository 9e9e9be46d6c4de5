"""`python -m scripts.checkpoints --arch ARCH --size SIZE`: build (or reuse) one, print its path."""

import sys

from scripts.checkpoints.build import main

sys.exit(main())

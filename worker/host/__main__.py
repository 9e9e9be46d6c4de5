"""`python -m worker.host --listen tcp://HOST:PORT (--keys DIR | --insecure) -- WORKER FLAGS`."""

from worker.host.host import main

if __name__ == "__main__":
    main()

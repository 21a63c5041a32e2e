"""`python -m gateway`: the `gateway` command."""

from .cli import main

if __name__ == "__main__":
    main()

"""``python -m tao`` - the same as the ``tao`` command."""

from .cli import main

if __name__ == "__main__":
    main()

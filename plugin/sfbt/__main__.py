import sys

from sfbt.cli import main

sys.exit(main())

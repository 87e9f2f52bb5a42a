import sys

from nmtbench.cli import main

sys.exit(main())

from nmtbench.cli import main
import sys
sys.exit(main())

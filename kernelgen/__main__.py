import sys

from kernelgen.cli import main

sys.exit(main())

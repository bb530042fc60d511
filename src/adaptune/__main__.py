import sys

from adaptune.cli import main

sys.exit(main())

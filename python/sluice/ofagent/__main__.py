import sys

from sluice.ofagent.agent import main

sys.exit(main())

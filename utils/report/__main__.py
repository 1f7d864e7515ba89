"""`python -m utils.report`: the generated parts of README.md and results/README.md (utils/report/readme.py)."""
from utils.report.readme import main

raise SystemExit(main())

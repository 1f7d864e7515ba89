"""`python -m utils.report`: README.md's results table (utils/report/readme.py)."""
from utils.report.readme import main

raise SystemExit(main())

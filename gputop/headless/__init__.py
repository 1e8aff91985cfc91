"""`gputop check` and `gputop snapshot`: one collection round without the UI, for cron and monitoring.

round.py collects (the dashboard's sources and poller, bounded by a deadline), readiness.py says what a
source still owes that round, verdict.py turns the view into problems and an exit status, report.py and
snapshot_json.py print them, command.py reads the arguments. Nothing here imports Textual.
"""

"""What a run writes and how it is read back: the results folder (run_folder.py), the
loggers writing params.json, result.json, progress.csv and TensorBoard events (logger.py),
result values made JSON-safe and flat (result_values.py), the console progress table
(progress.py) and plots of finished runs (plot.py).

It imports none of its modules: `rlfleet.results.logger` must stay cheap to import.
"""

"""The driver: what runs a search between its entry points and its parts. The checks before
any study exists (`preflight`), the loop that asks the searcher, hands jobs to an executor and
records what comes back in the study (`runner`), and the console, progress bar and log files
(`console`)."""

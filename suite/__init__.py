"""The review suite: tasks on real code, one strict scorer, a resumable runner and its report.

Imported as ``panelist.suite``: ``tasks`` (the loader), ``fieldset`` (the common field set
other tools write, mapped onto the kinds), ``taskfiles`` (the files a task may read, and how),
``answers`` (the strict parser and scorer), ``excerpt`` (what of a file a prompt shows),
``prompts`` (a task as messages), ``results`` (the per-sample JSONL), ``runner`` (tasks × models × epochs through the seats core),
``report`` (per-model rates with 95% intervals) and ``demo`` (offline simulated models).
"""

"""The domain, one subpackage per concept; arrows point down (``tests/test_layout.py``).

    server/    the only importer of http.server: its front end (front/: the listener,
               connections and their deadlines, handler threads, workers: N processes on
               one port, and stopping one); routing, gates, the catch-all; the gateway's
               routes (Ollama's and Gemini's: clientapis), streams, the dashboard, its API
               and the body each of its writes declares (bodies), the panels' filters
               (panelquery) and the model page (modelpage); Parts (a server's long-lived pieces, built once); guard, keys,
               rate limits (ratelimit; ratedb, on PostgreSQL), sessions (and the table
               workers share)
    cli/       ``panelist noun verb`` (main), the MCP server
    wire/      formats <-> one panel request: chat (its stream), models, responses, messages,
               ollama, gemini, error shapes
    upkeep/    health probes, retirement, failing models, the schedule and (on a database)
               its leader, onboarding (queue, worker, the calls it records before sending),
               the demo's one simulator
    race/      benchmark (one race), blind (masking; names: the built-in table), jury, judge,
               tooldiff, transcript, report, verdict, costs, chatjob, registry; judgecheck
               (a judge against people's verdicts: checkprompt, agreement, checks)
    panel/     request (a body checked whole), panel (run and assemble), sections (its text),
               seating, explore, pick, merge, failures, decider, history, suggest, prompt,
               jsonshape, budgets, owedorder, usage, held (what a panel's answers hold of the
               server's memory budget)
    seats/     the seats core: calls at once, deadlines, cancellation, admission; calls
               (what it is given and hands back), core (Seats), record (the one line shape
               of a model call), seatset (a set in flight: on the core's
               threads, or sent and read by its caller's thread alone)
    ledger/    the evidence: ledger (writes, the facade), logs (JSONL) or pglogs (PostgreSQL)
               beneath it, pgcopy (db import / export), ids, index (the pure fold;
               histogram, usage windows, outcomes, pairs), snapshot, queries; verdict rules,
               suite and race evidence, ratings (bradleyterry: the fit); search and
               searchfold (the panels' SQLite FTS5 index, following the logs; pgsearch, the
               same fed from the database)
    roster/    roster, keyenv (which variables an endpoint key is read from), collection,
               grades, catalog, learned, known, discover, demo
    upstream/  client (one call, streamed or not), proxy, admission (pacing per endpoint; its
               shared state in the data folder, admitfiles, or in PostgreSQL, admitdb), sim
               (simulated provider; simanswers, what it answers; simstream, its streams)
    store/     jsonwire, jsonl (appends, tail and backward readers), configfile, atomic (the
               one atomic write), flock (a job held by one process), pg (PostgreSQL
               connections), pgschema (its tables) and pglease (rows held until an expiry,
               renewed): storage with no domain words

Shared nouns on top: ``errors`` (the error tree), ``home`` (the data folder), ``alerts`` (the
alert log), ``stats`` (intervals, Student's t, Holm), ``plaintext`` (printable free text); ``offload`` is the
command line's entry point. The review suite (``suite/``) sits above the seats core, below
``upkeep``, ``server`` and ``cli``.
"""

"""The fleet questions, as SQL that DuckDB and Spark both run unchanged.

Each query is written in the part of SQL the two engines share (no QUALIFY, no engine
functions, explicit casts for division, NULLIF against division by zero, every ORDER BY a full
key), and every time is an int64 sum, so both engines give identical tables.
"""

from __future__ import annotations

QUERIES: dict[str, str] = {
    # per program and host: how many threads ran at a time while any ran, and how many waited
    "parallelism": """
SELECT r.program, r.host, r.recordings, r.wall_ns, t.busy_ns, t.running_ns,
       CAST(t.running_ns AS DOUBLE) / NULLIF(CAST(t.busy_ns AS DOUBLE), 0) AS parallelism,
       CAST(t.runnable_ns AS DOUBLE) / NULLIF(CAST(r.wall_ns AS DOUBLE), 0) AS waiting_for_cpu,
       CAST(t.sync_wait_ns AS DOUBLE) / NULLIF(CAST(r.wall_ns AS DOUBLE), 0) AS waiting_on_locks
FROM (SELECT program, host, CAST(COUNT(*) AS BIGINT) AS recordings, CAST(SUM(wall_ns) AS BIGINT) AS wall_ns
      FROM recordings GROUP BY program, host) r
JOIN (SELECT program, host, CAST(SUM(crit_ns) AS BIGINT) AS busy_ns, CAST(SUM(running_ns) AS BIGINT) AS running_ns,
             CAST(SUM(runnable_ns) AS BIGINT) AS runnable_ns, CAST(SUM(sync_wait_ns) AS BIGINT) AS sync_wait_ns
      FROM threads GROUP BY program, host) t
  ON r.program = t.program AND r.host = t.host
ORDER BY r.program, r.host
""",
    # per program and host: each role and pool's share of the run time (criticality) and width
    "criticality": """
SELECT program, host, role, pool, CAST(COUNT(DISTINCT recording_id) AS BIGINT) AS recordings,
       CAST(SUM(crit_ns) AS BIGINT) AS crit_ns, CAST(SUM(running_ns) AS BIGINT) AS running_ns,
       CAST(SUM(crit_ns) AS DOUBLE) / NULLIF(CAST(SUM(SUM(crit_ns)) OVER (PARTITION BY program, host) AS DOUBLE), 0) AS share,
       CAST(SUM(running_ns) AS DOUBLE) / NULLIF(CAST(SUM(crit_ns) AS DOUBLE), 0) AS parallelism
FROM threads
GROUP BY program, host, role, pool
ORDER BY program, host, crit_ns DESC, role, pool
""",
    # per program and host: time waited on each lock (by its page offset) by each pool; the waits
    # of threads that wait for work (idle: parked, a runtime's service threads) apart
    "locks": """
SELECT program, host, lock_site, pool, MAX(released_by) AS released_by,
       CAST(COUNT(DISTINCT recording_id) AS BIGINT) AS recordings,
       CAST(SUM(CASE WHEN idle THEN 0 ELSE waits END) AS BIGINT) AS waits,
       CAST(SUM(CASE WHEN idle THEN 0 ELSE wait_ns END) AS BIGINT) AS wait_ns,
       CAST(SUM(CASE WHEN idle THEN 0 ELSE wait_ns END) AS DOUBLE) / CAST(COUNT(DISTINCT recording_id) AS DOUBLE) AS wait_ns_per_recording,
       CAST(SUM(CASE WHEN idle THEN wait_ns ELSE 0 END) AS BIGINT) AS idle_wait_ns
FROM waits
GROUP BY program, host, lock_site, pool
ORDER BY program, host, wait_ns DESC, idle_wait_ns DESC, lock_site, pool
""",
    # per program and host: the windows with the lowest parallelism (the most serial stretches)
    "windows": """
SELECT program, host, date, recording_id, window_index, window_start_ns, window_ns, busy_ns, running_ns,
       parallelism, runnable_ns, sync_wait_ns
FROM (SELECT program, host, date, recording_id, window_index, window_start_ns, window_ns, busy_ns, running_ns,
             parallelism, runnable_ns, sync_wait_ns,
             ROW_NUMBER() OVER (PARTITION BY program, host
                                ORDER BY parallelism, busy_ns DESC, recording_id, window_index) AS rank_in_host
      FROM (SELECT program, host, date, recording_id, window_index, MIN(window_start_ns) AS window_start_ns,
                   CAST(MAX(window_end_ns - window_start_ns) AS BIGINT) AS window_ns, CAST(SUM(crit_ns) AS BIGINT) AS busy_ns,
                   CAST(SUM(running_ns) AS BIGINT) AS running_ns,
                   CAST(SUM(running_ns) AS DOUBLE) / CAST(SUM(crit_ns) AS DOUBLE) AS parallelism,
                   CAST(SUM(runnable_ns) AS BIGINT) AS runnable_ns, CAST(SUM(sync_wait_ns) AS BIGINT) AS sync_wait_ns
            FROM threads
            GROUP BY program, host, date, recording_id, window_index
            HAVING SUM(crit_ns) > 0) w) ranked
WHERE rank_in_host <= {worst}
ORDER BY program, host, parallelism, busy_ns DESC, recording_id, window_index
""",
}

TITLES = {
    "parallelism": "Parallelism per program and host",
    "criticality": "Criticality of each role and pool",
    "locks": "Wait time per lock",
    "windows": "Worst windows (lowest parallelism)",
}


def sql_of(name: str, worst: int = 3) -> str:
    from scalestack.errors import UserError

    if name not in QUERIES:
        raise UserError(f"unknown fleet query {name!r}; choose from {', '.join(QUERIES)}")
    return QUERIES[name].replace("{worst}", str(int(worst)))

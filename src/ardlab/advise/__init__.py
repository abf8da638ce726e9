"""``ardlab advise``: which MPI library and Allreduce algorithm make *this* training job fastest on *this*
allocation, measured within a time budget: the job's calls learned, only those sizes raced, the choice checked in
training against each library's default (``run``: the steps; ``race``: who leaves the race; ``answer``: the table,
the env files, JSON and Markdown)."""

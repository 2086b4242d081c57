"""What every test stands on, shared by the suite, its fixtures and the soak campaign.

Tests import each name from the module that defines it; tests/conftest.py holds only
the fixtures and hooks.

The ground:
- `env`: the hermetic environment (own HOME and XDG dirs, no system git config,
  fixed identities), libgit2's search paths, and a clock that moves when told to.
- `git`: real git as a subprocess, bare remotes, clones, `git daemon` on 127.0.0.1.
- `cli`: majordomus in-process (`__main__.run`) and as a real process (own session,
  SIGINT at its default, so a suite run as a background job never hangs).
- `forks`: Python scripts as real processes forked from one prepared Python.
- `notes`: an independent reader of the notes ref: git plumbing and tomllib, never
  majordomus' own parser.
- `repo`: `Repo`, a throwaway repository and the means to drive majordomus in it,
  clones of a seeded bare remote, and the record ids every read command sees.
- `locks`: the lock file a killed writer leaves behind, of a known age.
- `memory_graph`: commit graphs in memory, and the graph answers by brute force.

Fixtures on disk (fixtures/):
- `corpus`: the notes corpus in fixtures/notes/ and what a reader must make of it.
- `golden`, `golden_scenarios`, `golden_refusals`: the golden transcripts and the
  scenarios that produce them.

Hostile teammates:
- `hostile_notes`: the corpus planted in a repository, and the reads it goes through.
- `attacks`: a victim's clones and an attacker's behind one bare remote;
  `agent_text`: what an agent and a person are handed there, and its checks.
- `trees`: a victim and an attacker for the hostile notes tree and notes ref tests.

Reliability (tests/reliability/ and the soak):
- `contracts`: the durability contract of the notes ref, what a terminal may receive.
- `strategies`, `properties`: hypothesis strategies and the properties they feed.
- `notes_merge`: two forked notes commits merged by the store.
- `trials`: one trial of each durability campaign.
"""

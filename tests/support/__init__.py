"""What every test stands on, shared by the suite, its fixtures and the soak campaign.

- `env`: the hermetic environment (own HOME and XDG dirs, no system git config,
  fixed identities), libgit2's search paths, and a clock that moves when told to.
- `git`: real git as a subprocess, bare remotes, clones, `git daemon` on 127.0.0.1.
- `cli`: majordomus in-process (`__main__.run`) and as a real process (own session,
  SIGINT at its default, so a suite run as a background job never hangs).
- `notes`: an independent reader of the notes ref: git plumbing and tomllib, never
  majordomus' own parser.
- `repo`: `Repo`, a throwaway repository and the means to drive majordomus in it.
"""

// Package pgembed runs a private Postgres server for Sluice when no database
// URL is configured, and for tests (see internal/pgtest).
//
// Start creates the cluster with initdb on first use and then runs the
// installed `postgres` binary as a child process. Decisions worth knowing:
//
//   - initdb writes the cluster in <DataDir>.initdb, renamed to DataDir
//     once whole, so an interrupted first initdb leaves no cluster that
//     looks whole (it wrote PG_VERSION first); the next Start removes
//     what it left and runs it again.
//   - No TCP. The server listens only on a Unix socket inside the data
//     directory (listen_addresses is empty), and pg_hba trusts local socket
//     connections and rejects host ones. The data directory is mode 0700, so
//     only its owner (and root) can reach the socket: that is what makes
//     trust authentication safe.
//   - The socket path is <DataDir>/.s.PGSQL.5432 and must fit the operating
//     system's limit for Unix socket paths (107 bytes on Linux), so DataDir
//     can be at most 93 bytes long on Linux. Start fails with a clear error
//     otherwise.
//   - Postgres refuses to run as root. When Sluice runs as root, initdb and
//     the server run as the `postgres` OS user, the data directory is chowned
//     to it (only when Start created it or it is empty: one holding another
//     user's cluster is refused, naming both users), and every directory
//     above it must let that user enter.
//   - The cluster is created with UTF8 encoding and the C locale, so text
//     sorts bytewise and the cluster does not depend on which OS locales
//     are installed.
//   - One owner at a time. Start takes an flock on the data directory for
//     the life of the returned *Postgres; a second Start on the same
//     directory fails while the first owner lives. The lock dies with its
//     process, so a Postgres server still running from a crashed owner is a
//     leftover: Start stops it (fast shutdown, then harder) before starting
//     its own. Only a postmaster working in the data directory is
//     stopped: a postmaster.pid whose pid another process has now (after
//     a reboot, another cluster's postgres, say) is removed instead.
//   - initdb and the server get only the environment variables they use
//     (serverEnv), so the owner's secrets do not reach their
//     /proc/<pid>/environ.
//   - On Linux the server gets SIGINT (fast shutdown) when its parent dies
//     (Pdeathsig), so even a SIGKILLed Sluice does not leave it behind.
//   - The server is supervised: one that exits without Stop asking (killed,
//     crashed) is restarted on the same data and socket after its orphaned
//     backends are ended, with a delay that doubles from RestartDelay; past
//     MaxRestarts exits within RestartWindow the supervisor gives up and
//     closes Failed, and the owner decides (Sluice exits non-zero). When
//     Sluice is PID 1, the dead server's backends become its children and
//     are reaped.
//   - Server log lines go to the slog logger (FATAL and PANIC at warn level,
//     the rest at debug); the last lines are included in start errors.
package pgembed

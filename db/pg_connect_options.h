// How to reach PostgreSQL, and the limits every connection gets. No libpq
// here: db/postgres_store.h passes these on to callers outside db/.
#ifndef NORMSWEEP_DB_PG_CONNECT_OPTIONS_H_
#define NORMSWEEP_DB_PG_CONNECT_OPTIONS_H_

#include <string>

#include "absl/time/time.h"

namespace normsweep::db {

struct PgConnectOptions {
  std::string conninfo;  // URL or key=value; empty: the PG* environment
  // The server's statement_timeout (0: none).
  absl::Duration statement_timeout = absl::Seconds(10);
  // The client's own deadline for an answer, statement_timeout plus this
  // margin (none when statement_timeout is 0): a server or network that stops
  // answering is not waited for forever. The query is then cancelled; see
  // PgConnection::Exec.
  absl::Duration client_timeout_margin = absl::Seconds(5);
  absl::Duration connect_timeout = absl::Seconds(5);
  std::string application_name = "normsweep";
  // plan_cache_mode = force_generic_plan: for connections that run only the
  // hot prepared statements (PostgresStore's group runners), whose generic
  // plans are what they need; planning afresh costs them more than it saves.
  bool generic_plans = false;

  // statement_timeout + client_timeout_margin, or InfiniteDuration().
  absl::Duration ClientTimeout() const {
    if (statement_timeout <= absl::ZeroDuration()) return absl::InfiniteDuration();
    return statement_timeout + client_timeout_margin;
  }
};

}  // namespace normsweep::db

#endif  // NORMSWEEP_DB_PG_CONNECT_OPTIONS_H_

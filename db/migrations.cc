// Migrations, then views: the rules are in migrations.h's header comment.
#include "db/migrations.h"

#include <cstdint>
#include <set>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "db/pg_connection.h"

namespace normsweep::db {
namespace {

// pg_advisory_lock key for migrations ("nsmg").
constexpr int64_t kMigrationLockKey = 0x6e736d67;

bool IsBlank(std::string_view s) {
  for (char c : s) {
    if (c != ' ' && c != '\n' && c != '\t' && c != '\r') return false;
  }
  return true;
}

// "name", for a name read back from schema_views.
std::string QuoteIdentifier(std::string_view name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// Runs sql's statements; an error names `what`.
absl::Status ExecScript(PgConnection& conn, std::string_view sql, const std::string& what) {
  for (const std::string& statement : SplitSqlStatements(sql)) {
    absl::Status status = conn.Exec(statement).status();
    if (!status.ok()) return absl::Status(status.code(), absl::StrCat(what, ": ", status.message()));
  }
  return absl::OkStatus();
}

// Drops the views of the set last created (reverse creation order), then
// those of `views` that are left (views that a migration made: 0002 to 0013
// created views before db/views existed). A name that is no view is left
// alone (trial_metrics was a table up to 0005).
absl::Status DropViews(PgConnection& conn, const std::vector<std::string>& last_created,
                       const std::vector<View>& views) {
  std::vector<std::string> names(last_created.rbegin(), last_created.rend());
  for (auto it = views.rbegin(); it != views.rend(); ++it) names.push_back(it->name);
  ASSIGN_OR_RETURN(PgResult existing, conn.Exec("SELECT viewname FROM pg_views WHERE schemaname = current_schema()"));
  std::set<std::string> to_drop;
  for (int i = 0; i < existing.rows(); ++i) to_drop.insert(existing.GetString(i, 0));
  for (const std::string& name : names) {
    if (to_drop.erase(name) == 0) continue;  // no such view, or dropped already
    absl::Status status = conn.Exec(absl::StrCat("DROP VIEW ", QuoteIdentifier(name))).status();
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat("dropping view ", name, " to re-create the views of db/views (",
                                                      "a view outside db/views that reads it must go first): ",
                                                      status.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status CreateViews(PgConnection& conn, const std::vector<View>& views) {
  for (const View& v : views) {
    RETURN_IF_ERROR(ExecScript(conn, v.sql, absl::StrCat("view ", v.name)));
    ASSIGN_OR_RETURN(PgResult made, conn.Exec("SELECT count(*) FROM pg_views"
                                              " WHERE schemaname = current_schema() AND viewname = $1",
                                              PgParams().Add(v.name)));
    if (made.GetInt64(0, 0) != 1) {
      return absl::InternalError(absl::StrCat("db/views: the file of view ", v.name, " creates no view of that name"));
    }
  }
  return absl::OkStatus();
}

// The migrations and views in one transaction; the caller holds the lock.
absl::Status ApplyInTransaction(PgConnection& conn, const std::vector<const Migration*>& pending,
                                const std::vector<std::string>& last_created, const std::vector<View>& views,
                                const std::string& hash) {
  RETURN_IF_ERROR(DropViews(conn, last_created, views));
  for (const Migration* m : pending) {
    RETURN_IF_ERROR(ExecScript(conn, m->sql, absl::StrCat("migration ", m->name)));
    RETURN_IF_ERROR(conn.Exec("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
                              PgParams().Add(static_cast<int64_t>(m->version)).Add(m->name))
                        .status());
  }
  if (!pending.empty()) RETURN_IF_ERROR(DropViews(conn, {}, views));
  RETURN_IF_ERROR(CreateViews(conn, views));
  PgArrayOf<std::string> names;
  for (const View& v : views) names.Add(v.name);
  return conn.Exec("INSERT INTO schema_views (hash, views) VALUES ($1, $2)", PgParams().Add(hash).Add(names))
      .status();
}

absl::StatusOr<int> ApplyLocked(PgConnection& conn, const std::vector<Migration>& migrations,
                                const std::vector<View>& views) {
  RETURN_IF_ERROR(conn.Exec("CREATE TABLE IF NOT EXISTS schema_migrations ("
                            " version integer PRIMARY KEY,"
                            " name text NOT NULL,"
                            " applied_at timestamptz NOT NULL DEFAULT now())")
                      .status());
  // One row per (re-)creation of the views; the last one says what is there.
  RETURN_IF_ERROR(conn.Exec("CREATE TABLE IF NOT EXISTS schema_views ("
                            " id bigserial PRIMARY KEY,"
                            " hash text NOT NULL,"
                            " views text[] NOT NULL,"
                            " applied_at timestamptz NOT NULL DEFAULT now())")
                      .status());
  ASSIGN_OR_RETURN(PgResult applied, conn.Exec("SELECT version FROM schema_migrations"));
  std::set<int64_t> done;
  for (int i = 0; i < applied.rows(); ++i) done.insert(applied.GetInt64(i, 0));
  std::set<int> seen;
  std::vector<const Migration*> pending;
  for (const Migration& m : migrations) {
    if (!seen.insert(m.version).second) {
      return absl::InternalError(absl::StrCat("migration version ", m.version, " appears twice"));
    }
    if (!done.contains(m.version)) pending.push_back(&m);
  }
  // A newer replica has migrated this database (a rolling upgrade: this
  // binary is the older one, restarted before it was replaced). The views
  // are the newer binary's; re-creating this binary's would put the old
  // definitions back under the newer replicas. Its own pending migrations,
  // if any, are applied (the newer binary has them too, so there are none
  // unless versions were skipped).
  const bool newer_schema = !done.empty() && !seen.empty() && *done.rbegin() > *seen.rbegin();
  if (newer_schema && pending.empty()) return 0;
  ASSIGN_OR_RETURN(PgResult last, conn.Exec("SELECT s.hash, u.name FROM"
                                            " (SELECT hash, views FROM schema_views ORDER BY id DESC LIMIT 1) s"
                                            " LEFT JOIN LATERAL unnest(s.views) WITH ORDINALITY AS u (name, i) ON true"
                                            " ORDER BY u.i"));
  const std::string hash = ViewSetHash(views);
  if (pending.empty() && last.rows() > 0 && last.GetString(0, 0) == hash) return 0;
  if (newer_schema) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the database has migration ", *done.rbegin(), ", newer than this binary's ", *seen.rbegin(),
        ", but lacks some of this binary's: ", pending.front()->version, " (", pending.front()->name, ")"));
  }
  std::vector<std::string> last_created;
  for (int i = 0; i < last.rows(); ++i) {
    if (!last.IsNull(i, 1)) last_created.push_back(last.GetString(i, 1));
  }
  RETURN_IF_ERROR(conn.Exec("BEGIN").status());
  absl::Status status = ApplyInTransaction(conn, pending, last_created, views, hash);
  if (!status.ok()) {
    (void)conn.Exec("ROLLBACK");
    return status;
  }
  RETURN_IF_ERROR(conn.Exec("COMMIT").status());
  return static_cast<int>(pending.size());
}

}  // namespace

std::vector<std::string> SplitSqlStatements(std::string_view sql) {
  std::vector<std::string> out;
  std::string current;
  bool in_single = false, in_line_comment = false;
  std::string dollar_tag;  // non-empty inside $tag$ ... $tag$
  for (size_t i = 0; i < sql.size(); ++i) {
    char c = sql[i];
    current += c;
    if (in_line_comment) {
      if (c == '\n') in_line_comment = false;
      continue;
    }
    if (!dollar_tag.empty()) {
      if (c == '$' && sql.substr(i, dollar_tag.size()) == dollar_tag) {
        current += std::string(sql.substr(i + 1, dollar_tag.size() - 1));
        i += dollar_tag.size() - 1;
        dollar_tag.clear();
      }
      continue;
    }
    if (in_single) {
      if (c == '\'') in_single = false;
      continue;
    }
    if (c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {
      in_line_comment = true;
    } else if (c == '\'') {
      in_single = true;
    } else if (c == '$') {
      size_t end = sql.find('$', i + 1);
      if (end != std::string_view::npos) {
        std::string_view tag = sql.substr(i, end - i + 1);
        bool ok = true;
        for (char t : tag.substr(1, tag.size() - 2)) {
          if (!(isalnum(static_cast<unsigned char>(t)) || t == '_')) ok = false;
        }
        if (ok && !(tag.size() > 2 && isdigit(static_cast<unsigned char>(tag[1])))) {
          dollar_tag = std::string(tag);
          current += std::string(tag.substr(1));
          i = end;
        }
      }
    } else if (c == ';') {
      current.pop_back();
      if (!IsBlank(current)) out.push_back(current);
      current.clear();
    }
  }
  if (!IsBlank(current)) {
    // Trailing comment-only text is not a statement.
    std::string_view rest = current;
    bool only_comments = true;
    size_t pos = 0;
    while (pos < rest.size()) {
      size_t nl = rest.find('\n', pos);
      std::string_view line = rest.substr(pos, nl == std::string_view::npos ? rest.npos : nl - pos);
      size_t first = line.find_first_not_of(" \t\r");
      if (first != std::string_view::npos && line.substr(first, 2) != "--") only_comments = false;
      if (nl == std::string_view::npos) break;
      pos = nl + 1;
    }
    if (!only_comments) out.push_back(current);
  }
  return out;
}

std::string ViewSetHash(const std::vector<View>& views) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a offset basis
  auto add = [&h](std::string_view s) {
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
    h = (h ^ 0) * 0x100000001b3ULL;  // a terminator: ("ab", "c") and ("a", "bc") differ
  };
  for (const View& v : views) {
    add(v.name);
    add(v.sql);
  }
  return absl::StrFormat("%016x", h);
}

absl::StatusOr<int> ApplyMigrations(PgConnection& conn, const std::vector<Migration>& migrations,
                                    const std::vector<View>& views) {
  // A migration (an index on a large table) or waiting for another
  // scheduler's migrations may take longer than the statement timeout.
  ASSIGN_OR_RETURN(PgResult timeout, conn.Exec("SELECT current_setting('statement_timeout')"));
  const std::string previous_timeout = timeout.GetString(0, 0);
  RETURN_IF_ERROR(conn.Exec("SELECT set_config('statement_timeout', '0', false)").status());
  // The client-side deadline too, until this returns.
  const absl::Duration client_timeout = conn.client_timeout();
  conn.set_client_timeout(absl::InfiniteDuration());
  absl::Cleanup restore_client_timeout = [&conn, client_timeout] { conn.set_client_timeout(client_timeout); };
  RETURN_IF_ERROR(conn.Exec("SELECT pg_advisory_lock($1)", PgParams().Add(kMigrationLockKey)).status());
  absl::StatusOr<int> result = ApplyLocked(conn, migrations, views);
  absl::Status unlock =
      conn.Exec("SELECT pg_advisory_unlock($1)", PgParams().Add(kMigrationLockKey)).status();
  absl::Status restore =
      conn.Exec("SELECT set_config('statement_timeout', $1, false)", PgParams().Add(previous_timeout)).status();
  if (result.ok() && !unlock.ok()) return unlock;
  if (result.ok() && !restore.ok()) return restore;
  return result;
}

}  // namespace normsweep::db

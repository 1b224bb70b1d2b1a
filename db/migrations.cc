#include "db/migrations.h"

#include <set>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
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

absl::StatusOr<int> ApplyLocked(PgConnection& conn, const std::vector<Migration>& migrations) {
  RETURN_IF_ERROR(conn.Exec("CREATE TABLE IF NOT EXISTS schema_migrations ("
                            " version integer PRIMARY KEY,"
                            " name text NOT NULL,"
                            " applied_at timestamptz NOT NULL DEFAULT now())")
                      .status());
  ASSIGN_OR_RETURN(PgResult applied, conn.Exec("SELECT version FROM schema_migrations"));
  std::set<int64_t> done;
  for (int i = 0; i < applied.rows(); ++i) done.insert(applied.GetInt64(i, 0));
  std::set<int> seen;
  int count = 0;
  for (const Migration& m : migrations) {
    if (!seen.insert(m.version).second) {
      return absl::InternalError(absl::StrCat("migration version ", m.version, " appears twice"));
    }
    if (done.contains(m.version)) continue;
    RETURN_IF_ERROR(conn.Exec("BEGIN").status());
    absl::Status status = absl::OkStatus();
    for (const std::string& statement : SplitSqlStatements(m.sql)) {
      status = conn.Exec(statement).status();
      if (!status.ok()) break;
    }
    if (status.ok()) {
      status = conn.Exec("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
                         PgParams().Add(static_cast<int64_t>(m.version)).Add(m.name))
                   .status();
    }
    if (!status.ok()) {
      (void)conn.Exec("ROLLBACK");
      return absl::Status(status.code(), absl::StrCat("migration ", m.name, ": ", status.message()));
    }
    RETURN_IF_ERROR(conn.Exec("COMMIT").status());
    ++count;
  }
  return count;
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

absl::StatusOr<int> ApplyMigrations(PgConnection& conn, const std::vector<Migration>& migrations) {
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
  absl::StatusOr<int> result = ApplyLocked(conn, migrations);
  absl::Status unlock =
      conn.Exec("SELECT pg_advisory_unlock($1)", PgParams().Add(kMigrationLockKey)).status();
  absl::Status restore =
      conn.Exec("SELECT set_config('statement_timeout', $1, false)", PgParams().Add(previous_timeout)).status();
  if (result.ok() && !unlock.ok()) return unlock;
  if (result.ok() && !restore.ok()) return restore;
  return result;
}

}  // namespace normsweep::db

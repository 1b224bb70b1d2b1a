// normsweep: the command-line client of normsweep-scheduler.
//
//   normsweep submit FILE.yaml|FILE.json [--watch] [--dry-run] [--request-id ID]
//   normsweep submit --name N --placements post,pre --warmup-steps 0,100 --lrs 1e-3,3e-3
//                    [--seeds 0,1] [--set field=value ...] [--watch]
//   normsweep watch ID | list [--state running|completed|cancelled] | show ID | cancel ID
//   normsweep trial ID | results ID [--format table|csv|json]
//   normsweep report ID --out DIR
//   normsweep export ID --table T [--metrics a,b] [--format csv|jsonl] [--out FILE]
//                    [--since CURSOR] [--follow] [--no-header]
//   normsweep workers [--live] [--all]
//
// --scheduler host:port, else $NORMSWEEP_SCHEDULER, else localhost:50051.
// TLS (common/tls.h): --tls-ca, --tls-cert, --tls-key, else NORMSWEEP_TLS_CA,
// NORMSWEEP_TLS_CERT, NORMSWEEP_TLS_KEY.
// Exit status: 0 on success, 1 when the scheduler refused or could not be
// reached, 2 for bad usage or a bad sweep file.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "client/boundary_tables.h"
#include "client/export_writer.h"
#include "client/progress_view.h"
#include "client/report/fetch.h"
#include "client/report/page.h"
#include "client/results.h"
#include "client/sweep_client.h"
#include "client/sweep_file.h"
#include "client/sweep_flags.h"
#include "client/sweep_tables.h"
#include "client/trial_failure.h"
#include "client/workers_table.h"
#include "common/api_token.h"
#include "common/cli_args.h"
#include "common/clock.h"
#include "common/tls.h"

namespace {

namespace v1 = normsweep::v1;
namespace cl = normsweep::client;

constexpr char kUsage[] = R"(normsweep: submit and follow LayerNorm warm-up/learning-rate sweeps.

Usage:
  normsweep submit FILE.yaml|FILE.json [--name NAME] [--set FIELD=VALUE ...] [--watch]
                   [--dry-run] [--request-id ID]
  normsweep submit --name NAME --placements post,pre [--warmup-steps 0,100,500 (default 0)] \
                   --lrs 5e-4,1e-3,3e-3 [--seeds 0,1,2 (default 0)] [--set FIELD=VALUE ...]
                   [--max-attempts N] [--max-interruptions N] [--priority N] [--max-concurrent N] [--watch]
  normsweep watch ID          live progress until the sweep ends, then its results
  normsweep list [--state running|completed|cancelled]
  normsweep show ID           the sweep and every trial (failure: by the rule of
                              proto/schema/failure.h, diverged or plateau, ...)
  normsweep trial ID          one trial's l0, unigram loss and failure to train,
                              metric history, FFN gradient norms,
                              per-block diagnostics (largest attention logit, update
                              ratios) at step 0 and the last evaluation, and every
                              attempt (re-queued ones: why)
  normsweep cancel ID
  normsweep results ID [--format table|csv|json]
  normsweep report ID --out DIR
                              DIR/index.html: one self-contained page (inline
                              SVG, no script) with the warm-up x lr heatmaps,
                              validation-loss curves and step-0 gradient norms
  normsweep export ID --table trials|metrics|grad_norms|diagnostics|attempts
                   [--metrics a,b] [--format csv|jsonl (default csv)] [--out FILE]
                   [--since CURSOR] [--follow] [--no-header]
                              every row of a table (ExportSweep), to stdout or
                              FILE: trial_id, then step, then the proto's field
                              names; floats that read back exactly; an absent
                              value is an empty field (JSON: null). Ends with
                              "cursor: X" on stderr: --since X exports only what
                              is new since; --follow keeps exporting until the
                              sweep ends; --no-header: CSV without its header
                              (to append to an earlier file)
  normsweep workers [--live] [--all]
                              registered workers: devices, live or not, running
                              trials, last heartbeat (--live: live ones only;
                              --all: also earlier runs of restarted workers)

Flags for every command:
  --scheduler HOST:PORT   default $NORMSWEEP_SCHEDULER, else localhost:50051
  --tls-ca FILE           TLS: the PEM CA that signed the scheduler's certificate
                          (default $NORMSWEEP_TLS_CA; unset: plaintext)
  --tls-cert FILE, --tls-key FILE
                          mutual TLS: this client's PEM certificate and key
                          (default $NORMSWEEP_TLS_CERT, $NORMSWEEP_TLS_KEY)

A sweep file is normsweep.v1.SweepSpec in YAML or JSON (see deploy/sweeps/);
--set FIELD=VALUE sets a field of the trainer config (TrainConfig, e.g.
--set layers=12 --set steps=300 --set data_file=/data/corpus.txt), also on
top of a sweep file's base (a value of 0 or "" there leaves the file's).
)";

int Usage(const std::string& message) {
  std::fprintf(stderr, "normsweep: %s\n(run normsweep --help for usage)\n", message.c_str());
  return 2;
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "normsweep: %s\n", std::string(status.message()).c_str());
  return status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

bool ParseId(const std::vector<std::string>& pos, int64_t* id, std::string* error) {
  if (pos.size() < 2) {
    *error = "missing the " + std::string(pos[0] == "trial" ? "trial" : "sweep") + " id";
    return false;
  }
  if (pos.size() > 2) {
    *error = "unexpected argument '" + pos[2] + "'";
    return false;
  }
  if (!absl::SimpleAtoi(pos[1], id) || *id <= 0) {
    *error = "not an id: '" + pos[1] + "' (ids are positive integers)";
    return false;
  }
  return true;
}

int PrintResults(cl::SweepClient& client, int64_t id, const std::string& format) {
  auto sweep = client.GetSweep(id);
  if (!sweep.ok()) return Fail(sweep.status());
  auto analysis = client.GetSweepAnalysis(id);
  if (!analysis.ok()) return Fail(analysis.status());
  if (format == "table") {
    std::fputs(cl::RenderResultsTable(*sweep, *analysis).c_str(), stdout);
    std::fputs(cl::RenderBoundaryTable(*analysis).c_str(), stdout);  // boundary_search lines, "" otherwise
  } else if (format == "csv") {
    std::fputs(cl::RenderResultsCsv(*analysis).c_str(), stdout);
  } else if (format == "json") {
    std::fputs(cl::RenderResultsJson(*sweep, *analysis).c_str(), stdout);
  } else {
    return Usage("--format: expected table, csv or json, got '" + format + "'");
  }
  return 0;
}

int Watch(cl::SweepClient& client, int64_t id) {
  cl::ProgressView view(isatty(STDOUT_FILENO) == 1, normsweep::RealClock::Get(), [](const std::string& text) {
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
  });
  v1::Sweep last;
  absl::Status s = client.Watch(id, [&](const v1::WatchSweepEvent& e) {
    last = e.sweep();
    view.Update(e.sweep());
    if (cl::BoundaryLinesChanged(e)) {  // boundary_search: the lines, as their trials finish
      if (auto a = client.GetSweepAnalysis(id); a.ok()) std::printf("\n%s", cl::RenderBoundaryProgress(*a).c_str());
    }
  });
  view.Finish();
  if (!s.ok()) return Fail(s);
  std::printf("sweep %ld %s\n", static_cast<long>(id), cl::SweepStateLabel(last.state()).c_str());
  return PrintResults(client, id, "table");
}

int Submit(cl::SweepClient& client, const normsweep::CliArgs& args) {
  absl::StatusOr<v1::SweepSpec> spec;
  if (args.positional.size() > 2) return Usage("unexpected argument '" + args.positional[2] + "'");
  if (args.positional.size() == 2) {
    for (const char* f : {"placements", "warmup-steps", "lrs", "seeds"}) {
      if (args.Has(f)) return Usage(std::string("--") + f + " cannot be combined with a sweep file");
    }
    spec = cl::LoadSweepSpec(args.positional[1]);
    if (spec.ok() && args.Has("name")) spec->set_name(args.Get("name"));
    if (spec.ok() && args.Has("set")) {
      // --set overrides fields of the file's base config, each set on it by
      // reflection: a merge would skip 0, false and "" (proto3 defaults).
      if (absl::Status s = cl::ApplySetFlags(args.All("set"), spec->mutable_base()); !s.ok()) {
        return Usage(std::string(s.message()));
      }
    }
  } else {
    spec = cl::SpecFromFlags(args);
  }
  if (!spec.ok()) return Usage(std::string(spec.status().message()));
  const bool dry_run = args.Has("dry-run");
  auto resp = client.Submit(*spec, args.Get("request-id", cl::NewRequestId()), dry_run);
  if (!resp.ok()) return Fail(resp.status());
  if (dry_run) {
    std::printf("valid: %d trials\n", resp->sweep().trial_count());
    return 0;
  }
  std::printf("%ld\n", static_cast<long>(resp->sweep().id()));
  std::fflush(stdout);
  if (!resp->created()) std::fprintf(stderr, "normsweep: this request id was submitted before: sweep %ld\n",
                                     static_cast<long>(resp->sweep().id()));
  if (args.Has("watch")) return Watch(client, resp->sweep().id());
  return 0;
}

int List(cl::SweepClient& client, const normsweep::CliArgs& args) {
  v1::SweepState state = v1::SWEEP_STATE_UNSPECIFIED;
  const std::string filter = args.Get("state");
  if (filter == "running") {
    state = v1::SWEEP_RUNNING;
  } else if (filter == "completed") {
    state = v1::SWEEP_COMPLETED;
  } else if (filter == "cancelled") {
    state = v1::SWEEP_CANCELLED;
  } else if (!filter.empty()) {
    return Usage("--state: expected running, completed or cancelled, got '" + filter + "'");
  }
  auto sweeps = client.ListSweeps(state);
  if (!sweeps.ok()) return Fail(sweeps.status());
  std::fputs(cl::RenderSweepList(*sweeps).c_str(), stdout);
  return 0;
}

int Show(cl::SweepClient& client, int64_t id) {
  auto sweep = client.GetSweep(id);
  if (!sweep.ok()) return Fail(sweep.status());
  auto trials = client.ListTrials(id);
  if (!trials.ok()) return Fail(trials.status());
  std::fputs(cl::RenderSweepDetail(*sweep, *trials).c_str(), stdout);
  return 0;
}

int Trial(cl::SweepClient& client, int64_t id) {
  auto t = client.GetTrial(id);
  if (!t.ok()) return Fail(t.status());
  // The failure rule reads the sweep's boundary search's max_val_loss.
  auto sweep = client.GetSweep(t->trial().sweep_id());
  if (!sweep.ok()) return Fail(sweep.status());
  std::fputs(cl::RenderTrialDetail(*t, cl::FailureMaxValLoss(sweep->spec())).c_str(), stdout);
  return 0;
}

int Report(cl::SweepClient& client, int64_t id, const normsweep::CliArgs& args) {
  const std::string out = args.Get("out");
  if (out.empty()) return Usage("report: --out DIR is required (the directory to write index.html into)");
  auto data = cl::FetchReportData(client, id);
  if (!data.ok()) return Fail(data.status());
  const absl::Status written = cl::WriteReport(out, cl::RenderReportHtml(*data));
  if (!written.ok()) return Fail(written);
  std::printf("%s/index.html: sweep %ld, %zu trials\n", out.c_str(), static_cast<long>(id), data->trials.size());
  return 0;
}

// `normsweep export`: ExportSweep's chunks as text, each chunk written
// whole before its cursor counts, so that the cursor printed at the end (also
// after a failure) continues exactly after the last row written.
int Export(cl::SweepClient& client, int64_t id, const normsweep::CliArgs& args) {
  const std::string table = args.Get("table");
  if (table.empty()) return Usage("export: --table is required: trials, metrics, grad_norms, diagnostics or attempts");
  absl::StatusOr<cl::ExportFormat> format = cl::ParseExportFormat(args.Get("format", "csv"));
  if (!format.ok()) return Usage(std::string(format.status().message()));
  if (args.Has("no-header") && *format != cl::ExportFormat::kCsv) return Usage("--no-header: only with --format csv");
  v1::ExportSweepRequest req;
  req.set_sweep_id(id);
  req.set_table(table);
  req.set_since(args.Get("since"));
  req.set_follow(args.Has("follow"));
  if (args.Has("metrics")) {
    if (table != "metrics") return Usage("--metrics: only with --table metrics");
    for (absl::string_view name : absl::StrSplit(args.Get("metrics"), ',')) {
      name = absl::StripAsciiWhitespace(name);
      if (name.empty()) return Usage("--metrics: an empty name in '" + args.Get("metrics") + "'");
      req.add_metrics(std::string(name));
    }
  }
  FILE* out = stdout;
  const std::string path = args.Get("out");
  if (args.Has("out")) {
    if (path.empty()) return Usage("--out: an empty file name");
    out = std::fopen(path.c_str(), "w");
    if (out == nullptr) {
      std::fprintf(stderr, "normsweep: --out: cannot write '%s': %s\n", path.c_str(), std::strerror(errno));
      return 1;
    }
  }
  // A progress line on a terminal's stderr, unless the rows go to that terminal.
  const bool progress = isatty(STDERR_FILENO) == 1 && !(out == stdout && isatty(STDOUT_FILENO) == 1);
  int64_t total_rows = 0;
  if (progress && table == "trials" && req.since().empty()) {
    if (auto sweep = client.GetSweep(id); sweep.ok()) total_rows = sweep->trial_count();
  }
  cl::ExportWriter writer(*format, !args.Has("no-header"));
  std::string text;
  std::string cursor;  // of the last chunk written whole
  absl::Status write_status;
  int64_t bytes = 0;
  const absl::Time start = absl::Now();
  absl::Time drawn = absl::InfinitePast();
  auto draw = [&](bool final) {
    const absl::Time now = absl::Now();
    if (!progress || (!final && now - drawn < absl::Milliseconds(100))) return;
    drawn = now;
    std::fprintf(stderr, "\r\033[K%s%s",
                 cl::ExportProgressLine(table, writer.rows(), total_rows, bytes, absl::ToDoubleSeconds(now - start))
                     .c_str(),
                 final ? "\n" : "");
  };
  const absl::Status exported = client.Export(req, [&](const v1::ExportChunk& chunk) {
    text.clear();
    write_status = writer.Append(chunk, &text);
    if (!write_status.ok()) return false;
    // Flushed chunk by chunk: a follower (tail -f, a notebook) sees whole rows.
    if (std::fwrite(text.data(), 1, text.size(), out) != text.size() || std::fflush(out) != 0) {
      write_status = absl::DataLossError(absl::StrCat("writing ", path.empty() ? "stdout" : "'" + path + "'", ": ",
                                                      std::strerror(errno)));
      return false;
    }
    bytes += static_cast<int64_t>(text.size());
    cursor = chunk.cursor();
    draw(false);
    return true;
  });
  draw(true);
  if (out != stdout && std::fclose(out) != 0 && write_status.ok()) {
    write_status = absl::DataLossError(absl::StrCat("writing '", path, "': ", std::strerror(errno)));
  }
  if (!cursor.empty()) std::fprintf(stderr, "cursor: %s\n", cursor.c_str());
  if (!write_status.ok()) {
    std::fprintf(stderr, "normsweep: export: %s\n", std::string(write_status.message()).c_str());
    return 1;
  }
  if (!exported.ok()) return Fail(exported);
  return 0;
}

int Workers(cl::SweepClient& client, const normsweep::CliArgs& args) {
  if (args.positional.size() > 1) return Usage("workers: unexpected argument '" + args.positional[1] + "'");
  auto workers = client.ListWorkers(args.Has("live"), args.Has("all"));
  if (!workers.ok()) return Fail(workers.status());
  std::fputs(cl::RenderWorkersTable(*workers, absl::Now()).c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  normsweep::CliArgs args;
  std::string error;
  if (!normsweep::ParseCliArgs(argc, argv, {"help", "watch", "dry-run", "live", "all", "follow", "no-header"}, &args, &error)) {
    return Usage(error);
  }
  if (args.Has("help") || args.positional.empty()) {
    std::fputs(kUsage, args.positional.empty() && !args.Has("help") ? stderr : stdout);
    return args.Has("help") ? 0 : 2;
  }
  std::string address = args.Get("scheduler");
  if (address.empty()) {
    const char* env = std::getenv("NORMSWEEP_SCHEDULER");
    address = env != nullptr && *env != '\0' ? env : "localhost:50051";
  }
  absl::StatusOr<std::string> api_token = normsweep::ApiTokenFromEnvironment();
  if (!api_token.ok()) {
    std::fprintf(stderr, "normsweep: %s\n", std::string(api_token.status().message()).c_str());
    return 2;
  }
  normsweep::TlsClientOptions tls;
  tls.ca = {args.Get("tls-ca"), "--tls-ca"};
  tls.cert = {args.Get("tls-cert"), "--tls-cert"};
  tls.key = {args.Get("tls-key"), "--tls-key"};
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      normsweep::MakeChannelCredentials(normsweep::TlsClientOptionsWithEnvironment(tls));
  if (!credentials.ok()) {
    std::fprintf(stderr, "normsweep: %s\n", std::string(credentials.status().message()).c_str());
    return 2;
  }
  cl::SweepClient client(address, absl::Seconds(15), *api_token, *credentials);
  const std::string& command = args.positional[0];
  if (command == "submit") return Submit(client, args);
  if (command == "list") return List(client, args);
  if (command == "workers") return Workers(client, args);
  int64_t id = 0;
  if (command == "watch" || command == "show" || command == "cancel" || command == "results" || command == "trial" ||
      command == "report" || command == "export") {
    if (!ParseId(args.positional, &id, &error)) return Usage(command + ": " + error);
  } else {
    return Usage("unknown command '" + command + "'");
  }
  if (command == "watch") return Watch(client, id);
  if (command == "show") return Show(client, id);
  if (command == "trial") return Trial(client, id);
  if (command == "results") return PrintResults(client, id, args.Get("format", "table"));
  if (command == "report") return Report(client, id, args);
  if (command == "export") return Export(client, id, args);
  auto sweep = client.CancelSweep(id);
  if (!sweep.ok()) return Fail(sweep.status());
  std::printf("sweep %ld %s\n", static_cast<long>(id), cl::SweepStateLabel(sweep->state()).c_str());
  return 0;
}

// normsweep: the command-line client of normsweep-scheduler. Its usage,
// command by command, is client/cli_usage.cc (`normsweep --help`,
// `normsweep COMMAND --help`).
//
// --scheduler host:port, else $NORMSWEEP_SCHEDULER, else localhost:50051.
// TLS (common/tls.h): --tls-ca, --tls-cert, --tls-key, else NORMSWEEP_TLS_CA,
// NORMSWEEP_TLS_CERT, NORMSWEEP_TLS_KEY.
// Exit status: 0 on success, 1 when the scheduler refused (a submit with
// warnings and without --force too) or could not be reached, 2 for bad usage
// or a bad sweep file, 130 when Ctrl-C stopped a watch (the sweep goes on).
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "client/boundary_tables.h"
#include "client/cli_usage.h"
#include "client/did_you_mean.h"
#include "client/export_writer.h"
#include "client/progress_view.h"
#include "client/report/fetch.h"
#include "client/report/page.h"
#include "client/results.h"
#include "client/submit_preview.h"
#include "client/sweep_client.h"
#include "client/sweep_file.h"
#include "client/sweep_flags.h"
#include "client/sweep_tables.h"
#include "client/trial_failure.h"
#include "client/workers_table.h"
#include "common/api_token.h"
#include "common/cli_args.h"
#include "common/clock.h"
#include "common/quote.h"
#include "common/tls.h"

namespace {

namespace v1 = normsweep::v1;
namespace cl = normsweep::client;

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

// Ctrl-C during a watch stops the watching, not the sweep: the handler says
// so (the text made before it is installed; write and _exit are
// async-signal-safe) and exits 130, as a process stopped by SIGINT does.
char interrupt_message[512];
size_t interrupt_message_size = 0;

extern "C" void OnInterruptDuringWatch(int) {
  ssize_t written = write(STDERR_FILENO, interrupt_message, interrupt_message_size);
  (void)written;
  _exit(128 + SIGINT);
}

void SayOnInterruptThatTheSweepGoesOn(int64_t id) {
  const std::string message = cl::InterruptedWatchMessage(id);
  interrupt_message_size = std::min(message.size(), sizeof interrupt_message);
  std::memcpy(interrupt_message, message.data(), interrupt_message_size);
  struct sigaction action = {};
  action.sa_handler = OnInterruptDuringWatch;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
}

int Watch(cl::SweepClient& client, int64_t id) {
  SayOnInterruptThatTheSweepGoesOn(id);
  cl::ProgressView view(isatty(STDOUT_FILENO) == 1, normsweep::RealClock::Get(), [](const std::string& text) {
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
  });
  v1::Sweep last;
  absl::Status s = client.Watch(id, [&](const v1::WatchSweepEvent& e) {
    last = e.sweep();
    view.Update(e);
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
  const bool force = args.Has("force");
  const std::vector<std::string> host_warnings = cl::HostWarnings(*spec);
  if (args.Has("dry-run")) {
    auto preview = client.Submit(*spec, "", /*validate_only=*/true, force);
    if (!preview.ok()) return Fail(preview.status());
    std::fputs(cl::RenderSubmitPreview(*preview, host_warnings).c_str(), stdout);
    return 0;
  }
  constexpr char kNotStored[] =
      "normsweep: not submitted, nothing stored: the sweep has warnings (above); normsweep submit --force submits "
      "it all the same\n";
  if (!host_warnings.empty() && !force) {
    // The scheduler's warnings too (nothing stored), so that all are said at once.
    auto check = client.Submit(*spec, "", /*validate_only=*/true, /*allow_warnings=*/false);
    if (!check.ok()) return Fail(check.status());
    std::fputs(cl::RenderWarnings(cl::AllWarnings(*check, host_warnings)).c_str(), stderr);
    std::fputs(kNotStored, stderr);
    return 1;
  }
  auto resp = client.Submit(*spec, args.Get("request-id", cl::NewRequestId()), /*validate_only=*/false, force);
  if (!resp.ok() && resp.status().code() == absl::StatusCode::kFailedPrecondition) {
    // The scheduler's warnings, in its message (which says that nothing was stored, and how to insist).
    std::fprintf(stderr, "normsweep: submit refused: %s\n", std::string(resp.status().message()).c_str());
    return 1;
  }
  if (!resp.ok()) return Fail(resp.status());
  // --force: stored all the same; the warnings are said once more.
  std::fputs(cl::RenderWarnings(cl::AllWarnings(*resp, host_warnings)).c_str(), stderr);
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

// A positive integer flag, 0 when absent.
bool PositiveFlag(const normsweep::CliArgs& args, const std::string& flag, int* out, std::string* error) {
  *out = 0;
  if (!args.Has(flag)) return true;
  if (!absl::SimpleAtoi(args.Get(flag), out) || *out <= 0) {
    *error = "--" + flag + ": expected a positive integer, got '" + args.Get(flag) + "'";
    return false;
  }
  return true;
}

int Trial(cl::SweepClient& client, int64_t id, const normsweep::CliArgs& args) {
  cl::MetricRows rows;
  std::string error;
  if (!PositiveFlag(args, "every", &rows.every, &error) || !PositiveFlag(args, "tail", &rows.tail, &error)) {
    return Usage("trial: " + error);
  }
  auto t = client.GetTrial(id);
  if (!t.ok()) return Fail(t.status());
  // The failure rule reads the sweep's boundary search's max_val_loss.
  auto sweep = client.GetSweep(t->trial().sweep_id());
  if (!sweep.ok()) return Fail(sweep.status());
  std::fputs(cl::RenderTrialDetail(*t, cl::FailureMaxValLoss(sweep->spec()), rows).c_str(), stdout);
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
  if (!normsweep::ParseCliArgs(argc, argv, {"help", "watch", "dry-run", "force", "live", "all", "follow", "no-header"},
                              &args, &error)) {
    return Usage(error);
  }
  if (args.positional.empty()) {
    std::fputs(cl::FullUsage().c_str(), args.Has("help") ? stdout : stderr);
    return args.Has("help") ? 0 : 2;
  }
  const std::string& command = args.positional[0];
  const std::optional<std::string> usage = cl::CommandUsage(command);
  if (!usage.has_value()) {
    return Usage("unknown command " + normsweep::QuoteForError(command) + cl::DidYouMean(command, cl::CommandNames()));
  }
  if (args.Has("help")) {
    std::fputs(usage->c_str(), stdout);
    return 0;
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
  if (command == "submit") return Submit(client, args);
  if (command == "list") return List(client, args);
  if (command == "workers") return Workers(client, args);
  // Every other command takes one id.
  int64_t id = 0;
  if (!ParseId(args.positional, &id, &error)) return Usage(command + ": " + error);
  if (command == "watch") return Watch(client, id);
  if (command == "show") return Show(client, id);
  if (command == "trial") return Trial(client, id, args);
  if (command == "results") return PrintResults(client, id, args.Get("format", "table"));
  if (command == "report") return Report(client, id, args);
  if (command == "export") return Export(client, id, args);
  auto sweep = client.CancelSweep(id);
  if (!sweep.ok()) return Fail(sweep.status());
  std::printf("sweep %ld %s\n", static_cast<long>(id), cl::SweepStateLabel(sweep->state()).c_str());
  return 0;
}

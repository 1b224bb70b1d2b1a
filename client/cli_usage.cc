#include "client/cli_usage.h"

#include "absl/strings/str_cat.h"

namespace normsweep::client {
namespace {

struct Command {
  const char* name;
  const char* text;  // synopsis lines, then what it does, indented
};

constexpr Command kCommands[] = {
    {"submit", R"(  normsweep submit FILE.yaml|FILE.json [--name NAME] [--set FIELD=VALUE ...]
                   [--dry-run] [--force] [--watch] [--request-id ID]
  normsweep submit --name NAME --placements post,pre --lrs 5e-4,1e-3,3e-3
                   [--warmup-steps 0,100,500 (default 0)] [--seeds 0,1,2 (default 0)]
                   [--set FIELD=VALUE ...] [--max-attempts N] [--max-interruptions N]
                   [--priority N] [--max-concurrent N] [--dry-run] [--force] [--watch]
                              submit a sweep from a file or from flags and print
                              its id. A file that leaves out seeds or warmup_steps
                              gets [0], as the flags do. --set FIELD=VALUE sets a
                              field of the trainer config (TrainConfig), also on
                              top of a file's base.
                              --dry-run: store nothing; print the expanded grid
                              (axes and values, trials per placement and variant),
                              the estimate of its cost and the warnings.
                              Warnings (a warm-up longer than the run, a grid of
                              over 1,000 trials, a data_file missing on this host)
                              stop a real submit, exit status 1 and nothing
                              stored, unless --force.
                              --watch: then follow it as `normsweep watch` does.
                              --request-id: the idempotency key (default: a new
                              one); a repeated submit with it returns the first
                              sweep
)"},
    {"watch", R"(  normsweep watch ID          live progress until the sweep ends, then its results.
                              Running counts trials that are training (a trial
                              leased but not started is counted apart). Ctrl-C
                              stops watching only: the sweep goes on
)"},
    {"list", R"(  normsweep list [--state running|completed|cancelled]
                              the sweeps: trials done (ended with an outcome of
                              their own), diverged, failed and cancelled apart
)"},
    {"show", R"(  normsweep show ID           the sweep and every trial (failure: by the rule of
                              proto/schema/failure.h, diverged or plateau, ...)
)"},
    {"trial", R"(  normsweep trial ID [--every N] [--tail N]
                              one trial's settings, l0, unigram loss and failure
                              to train, metric history, FFN gradient norms,
                              per-block diagnostics (largest attention logit,
                              update ratios) at step 0 and the last evaluation,
                              and every attempt (re-queued ones: why).
                              --every N: only the steps divisible by N, and the
                              last; --tail N: only the last N metric rows (of
                              those --every keeps)
)"},
    {"cancel", R"(  normsweep cancel ID         cancel the sweep: pending trials are not run, running
                              ones are stopped
)"},
    {"results", R"(  normsweep results ID [--format table|csv|json]
                              the warm-up x lr grid per placement and variant, the
                              sensitivity summaries, boundary lines
)"},
    {"report", R"(  normsweep report ID --out DIR
                              DIR/index.html: one self-contained page (inline
                              SVG, no script) with the warm-up x lr heatmaps,
                              validation-loss curves and step-0 gradient norms
)"},
    {"export", R"(  normsweep export ID --table trials|metrics|grad_norms|diagnostics|attempts
                   [--metrics a,b] [--format csv|jsonl (default csv)] [--out FILE]
                   [--since CURSOR] [--follow] [--no-header]
                              every row of a table (ExportSweep), to stdout or
                              FILE: trial_id, then step, then the proto's field
                              names (grad_norms: trial_id, step, layer, matrix,
                              norm); floats that read back exactly; an absent
                              value is an empty field (JSON: null). Ends with
                              "cursor: X" on stderr: --since X exports only what
                              is new since; --follow keeps exporting until the
                              sweep ends; --no-header: CSV without its header
                              (to append to an earlier file)
)"},
    {"workers", R"(  normsweep workers [--live] [--all]
                              registered workers: devices, live or not, running
                              trials, last heartbeat (--live: live ones only;
                              --all: also earlier runs of restarted workers)
)"},
};

constexpr char kCommonFlags[] = R"(Flags for every command:
  --scheduler HOST:PORT   default $NORMSWEEP_SCHEDULER, else localhost:50051
  --tls-ca FILE           TLS: the PEM CA that signed the scheduler's certificate
                          (default $NORMSWEEP_TLS_CA; unset: plaintext)
  --tls-cert FILE, --tls-key FILE
                          mutual TLS: this client's PEM certificate and key
                          (default $NORMSWEEP_TLS_CERT, $NORMSWEEP_TLS_KEY)
  --help                  this text (normsweep COMMAND --help: one command's)
)";

constexpr char kSweepFiles[] = R"(
A sweep file is normsweep.v1.SweepSpec in YAML or JSON (see deploy/sweeps/);
--set FIELD=VALUE sets a field of the trainer config (TrainConfig, e.g.
--set layers=12 --set steps=300 --set data_file=/data/corpus.txt), also on
top of a sweep file's base, where it wins over the file's value.

Exit status: 0 on success, 1 when the scheduler refused (a submit with
warnings too) or could not be reached, 2 for bad usage or a bad sweep file;
130 when Ctrl-C stopped a watch.
)";

}  // namespace

std::vector<std::string> CommandNames() {
  std::vector<std::string> names;
  for (const Command& c : kCommands) names.push_back(c.name);
  return names;
}

std::optional<std::string> CommandUsage(const std::string& command) {
  for (const Command& c : kCommands) {
    if (command == c.name) return absl::StrCat("Usage:\n", c.text, "\n", kCommonFlags);
  }
  return std::nullopt;
}

std::string FullUsage() {
  std::string out = "normsweep: submit and follow LayerNorm warm-up/learning-rate sweeps.\n\nUsage:\n";
  for (const Command& c : kCommands) absl::StrAppend(&out, c.text);
  absl::StrAppend(&out, "\n", kCommonFlags, kSweepFiles);
  return out;
}

}  // namespace normsweep::client

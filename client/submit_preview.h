// What `normsweep submit` says before a sweep is stored: the expanded grid
// and the estimate of its cost that the scheduler returns
// (SubmitSweepResponse's axes, groups, estimate and warnings; the scheduler
// computes them, so the CLI and the Python client show the same figures),
// and the warnings of both the scheduler and this host. Rendering is pure;
// HostWarnings reads the file system.
#ifndef NORMSWEEP_CLIENT_SUBMIT_PREVIEW_H_
#define NORMSWEEP_CLIENT_SUBMIT_PREVIEW_H_

#include <string>
#include <string_view>
#include <vector>

#include "normsweep/v1/sweep.pb.h"
#include "normsweep/v1/sweep_service.pb.h"

namespace normsweep::client {

// What the submitting host can tell and the scheduler cannot, each a
// sentence: a data_file (base.data_file, or a value of an extra axis over
// data_file) that does not exist here. Workers read it on their own hosts,
// so it may still be right: a warning, not an error.
std::vector<std::string> HostWarnings(const v1::SweepSpec& spec);

// The scheduler's warnings, then the host's.
std::vector<std::string> AllWarnings(const v1::SubmitSweepResponse& response,
                                     const std::vector<std::string>& host_warnings);

// "warning: ..." lines, one per warning; "" when there are none.
std::string RenderWarnings(const std::vector<std::string>& warnings);

// `normsweep submit --dry-run`: "valid: N trials", the grid's axes and their
// values, the trials per placement and variant, the estimate (FLOPs and
// training tokens, the throughput and where it comes from, slot- and
// core-hours, wall time on the registered slots) and the warnings (which
// stop a real submit unless --force). A response without a grid (an older
// scheduler) gives the first line and says so.
std::string RenderSubmitPreview(const v1::SubmitSweepResponse& response,
                                const std::vector<std::string>& host_warnings);

// The value in 3 significant digits with an SI prefix before unit:
// (1.234e15, "FLOP") -> "1.23 PFLOP", (950, "FLOP/s") -> "950 FLOP/s";
// prefixes up to E, then powers of ten.
std::string SiPrefixed(double value, std::string_view unit);

}  // namespace normsweep::client

#endif  // NORMSWEEP_CLIENT_SUBMIT_PREVIEW_H_

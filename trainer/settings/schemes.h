// The normalisation schemes, one row each: what differs between placements,
// written once. Parsing and names (configs, sweeps, the API, --help and its
// errors), the scheduler's lists, the report's titles and palette, the
// probes' columns, the parameter layout and the block program
// (trainer/program/block_program.cc) all read this table; none of them
// names a placement. docs/trainer.md's table is the other place a
// placement is written; "Adding a scheme" there lists what else a new one
// needs (its block program lines, a PyTorch reference and fixture, an op
// trace).
#ifndef NORMSWEEP_TRAINER_SETTINGS_SCHEMES_H_
#define NORMSWEEP_TRAINER_SETTINGS_SCHEMES_H_

#include <string>
#include <string_view>
#include <vector>

#include "trainer/settings/config.h"

namespace normsweep::trainer {

// Where one block's norms sit (ModelConfig::BlockPlacement resolves Mix-LN
// to Post-LN or Pre-LN blocks; its own row's block is unused).
struct BlockNorms {
  bool sublayer_input = false;   // ln1, ln2 on each sublayer's input (Pre-LN, Peri-LN)
  bool sublayer_output = false;  // ln1_out, ln2_out on each sublayer's output (Peri-LN)
  bool after_residual = false;   // ln1, ln2 on the residual sums, inside the stream (Post-LN, DeepNorm)
};

struct SchemeInfo {
  Placement placement;
  const char* name;        // canonical, as configs, sweeps, the API and the database spell it
  const char* alias;       // another name users may write and docs name ("sandwich"), or nullptr
  const char* spellings;   // further accepted spellings, space separated ("post-ln post_ln"), or ""
  const char* title;       // reports, probes: "Post-LN"
  const char* colour;      // the report's colour (Okabe & Ito 2008, colour-blind safe)
  BlockNorms block;
  bool final_norm;         // ln_f before the head when the model's last block is of this kind
  bool embedding_norm;     // ln_emb on the embedding
  bool deepnorm_residual;  // DeepNorm: residual scale alpha = (2N)^(1/4), init gain beta = (8N)^(-1/4)
  bool per_block;          // Mix-LN: Post-LN blocks, then Pre-LN ones, split by mix_post_fraction
};

// Every scheme, in the order reports and lists show them.
const std::vector<SchemeInfo>& Schemes();
// The row of p (every Placement has one).
const SchemeInfo& SchemeOf(Placement p);
// The row a user's name selects (canonical, alias or spelling), or nullptr.
const SchemeInfo* FindScheme(std::string_view name);
// The canonical names for messages and --help: "post, pre, peri (alias
// sandwich), deepnorm or mix" with sep ", " and last " or "; "post|pre|..."
// with sep "|" and last "|".
std::string SchemeNames(std::string_view sep = ", ", std::string_view last = " or ", bool aliases = true);

}  // namespace normsweep::trainer

#endif  // NORMSWEEP_TRAINER_SETTINGS_SCHEMES_H_

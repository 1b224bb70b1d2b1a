#include "trainer/settings/schemes.h"

#include <sstream>

namespace normsweep::trainer {

const std::vector<SchemeInfo>& Schemes() {
  // Colours: Okabe & Ito's palette (2008), distinct under the three common
  // colour-vision deficiencies, legible on white, none of them the
  // divergence marks' red (#d62728).
  static const std::vector<SchemeInfo> kSchemes = {
      // Xiong et al. 2020: norms after each residual sum.
      {Placement::kPostLN, "post", nullptr, "post-ln post_ln", "Post-LN", "#d55e00",  // vermillion
       {.after_residual = true}, false, false, false, false},
      // Xiong et al. 2020: norms on each sublayer's input, a final norm.
      {Placement::kPreLN, "pre", nullptr, "pre-ln pre_ln", "Pre-LN", "#0072b2",  // blue
       {.sublayer_input = true}, true, false, false, false},
      // Kim et al. 2025 (Peri-LN; "sandwich" in CogView, Ding et al. 2021):
      // input and output norms, an embedding norm, a final norm.
      {Placement::kPeriLN, "peri", "sandwich", "", "Peri-LN", "#009e73",  // bluish green
       {.sublayer_input = true, .sublayer_output = true}, true, true, false, false},
      // Wang et al. 2022: Post-LN with a scaled residual and a scaled init.
      {Placement::kDeepNorm, "deepnorm", nullptr, "", "DeepNorm", "#cc79a7",  // reddish purple
       {.after_residual = true}, false, false, true, false},
      // Li et al. 2024: Post-LN blocks first, then Pre-LN ones.
      {Placement::kMix, "mix", nullptr, "", "Mix-LN", "#e69f00",  // orange
       {}, false, false, false, true},
  };
  return kSchemes;
}

const SchemeInfo& SchemeOf(Placement p) {
  for (const SchemeInfo& s : Schemes()) {
    if (s.placement == p) return s;
  }
  return Schemes().front();  // unreachable: every Placement has a row
}

const SchemeInfo* FindScheme(std::string_view name) {
  for (const SchemeInfo& s : Schemes()) {
    if (name == s.name || (s.alias != nullptr && name == s.alias)) return &s;
    std::istringstream spellings(s.spellings);
    for (std::string w; spellings >> w;) {
      if (name == w) return &s;
    }
  }
  return nullptr;
}

std::string SchemeNames(std::string_view sep, std::string_view last, bool aliases) {
  std::string out;
  const std::vector<SchemeInfo>& all = Schemes();
  for (size_t i = 0; i < all.size(); ++i) {
    if (i > 0) out += i + 1 == all.size() ? last : sep;
    out += all[i].name;
    if (aliases && all[i].alias != nullptr) out += std::string(" (alias ") + all[i].alias + ")";
  }
  return out;
}

}  // namespace normsweep::trainer

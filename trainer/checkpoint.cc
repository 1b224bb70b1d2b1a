#include "trainer/checkpoint.h"

#include <cstdio>
#include <cstdlib>

#include "trainer/safetensors.h"
#include "trainer/settings/schemes.h"

namespace normsweep::trainer {
namespace {

constexpr char kMomentPrefixM[] = "optimizer.m.";
constexpr char kMomentPrefixV[] = "optimizer.v.";

StatusOr<int> MetadataInt(const std::map<std::string, std::string>& md, const std::string& key) {
  auto it = md.find(key);
  if (it == md.end()) return DataLoss("metadata lacks '" + key + "'");
  const std::string& s = it->second;
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) {
    return DataLoss("metadata '" + key + "' is not a non-negative integer: '" + s + "'");
  }
  return std::stoi(s);
}

Status CopyTensor(const SafeTensorsFile& file, const std::string& name, const TensorSpec& spec, float* dst) {
  auto it = file.tensors.find(name);
  if (it == file.tensors.end()) return DataLoss("missing tensor '" + name + "'");
  const SafeTensor& t = it->second;
  if (t.shape != spec.shape || t.floats.size() != spec.size) {
    auto join = [](const std::vector<int64_t>& shape) {
      std::string out;
      for (int64_t d : shape) {
        if (!out.empty()) out += ',';
        out += std::to_string(d);
      }
      return out;
    };
    const std::string want = join(spec.shape), got = join(t.shape);
    return DataLoss("tensor '" + name + "' has shape [" + got + "] (dtype " + t.dtype + "), expected float [" +
                    want + "]");
  }
  std::copy(t.floats.begin(), t.floats.end(), dst);
  return OkStatus();
}

}  // namespace

std::map<std::string, std::string> ModelMetadata(const ModelConfig& m) {
  std::map<std::string, std::string> md = {
      {"placement", PlacementName(m.placement)}, {"layers", std::to_string(m.layers)},
      {"d_model", std::to_string(m.d_model)},      {"heads", std::to_string(m.heads)},
      {"d_ff", std::to_string(m.d_ff)},            {"seq_len", std::to_string(m.seq_len)},
      {"positions", PositionsName(m.positions)}};
  // Issue 24's options, written only where they differ from the defaults,
  // so that a Post-LN or Pre-LN checkpoint reads as before.
  if (SchemeOf(m.placement).per_block) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.17g", m.mix_post_fraction);
    md["mix_post_fraction"] = buf;
  }
  if (m.qk_norm) md["qk_norm"] = "true";
  if (m.norm != NormKind::kLayerNorm) md["norm"] = NormName(m.norm);
  return md;
}

Status SaveNamedTensors(const std::string& path, const ParamLayout& layout, const std::vector<float>& values,
                        const std::map<std::string, std::string>& metadata) {
  std::vector<TensorToWrite> tensors;
  for (const TensorSpec& t : layout.tensors()) tensors.push_back({t.name, t.shape, values.data() + t.offset, nullptr});
  return WriteSafeTensors(path, metadata, tensors);
}

Status SaveCheckpoint(const std::string& path, const Checkpoint& c) {
  const ParamLayout layout = ParamLayout::ForModel(c.model);
  if (c.params.size() != layout.total()) return Internal("checkpoint: parameter count mismatch");
  std::map<std::string, std::string> md = c.metadata;
  for (auto& [k, v] : ModelMetadata(c.model)) md[k] = v;
  md["step"] = std::to_string(c.step);
  md["format"] = "normsweep-checkpoint-1";
  std::vector<TensorToWrite> tensors;
  for (const TensorSpec& t : layout.tensors()) tensors.push_back({t.name, t.shape, c.params.data() + t.offset, nullptr});
  if (c.has_optimizer_state) {
    if (c.m.size() != layout.total() || c.v.size() != layout.total()) {
      return Internal("checkpoint: optimizer state size mismatch");
    }
    for (const TensorSpec& t : layout.tensors()) {
      tensors.push_back({kMomentPrefixM + t.name, t.shape, c.m.data() + t.offset, nullptr});
      tensors.push_back({kMomentPrefixV + t.name, t.shape, c.v.data() + t.offset, nullptr});
    }
  }
  return WriteSafeTensors(path, md, tensors);
}

StatusOr<Checkpoint> LoadCheckpoint(const std::string& path) {
  StatusOr<SafeTensorsFile> file = ReadSafeTensors(path);
  if (!file.ok()) return file.status();
  auto fail = [&](const Status& s) { return Status(s.code(), "checkpoint '" + path + "': " + s.message()); };
  Checkpoint c;
  c.metadata = file->metadata;
  const auto& md = file->metadata;
  auto placement = md.count("placement") ? ParsePlacement(md.at("placement")) : StatusOr<Placement>(DataLoss("metadata lacks 'placement'"));
  if (!placement.ok()) return fail(DataLoss(placement.status().message()));
  c.model.placement = *placement;
  auto positions = md.count("positions") ? ParsePositions(md.at("positions")) : StatusOr<Positions>(Positions::kSinusoidal);
  if (!positions.ok()) return fail(DataLoss(positions.status().message()));
  c.model.positions = *positions;
  int* fields[] = {&c.model.layers, &c.model.d_model, &c.model.heads, &c.model.d_ff, &c.model.seq_len};
  const char* keys[] = {"layers", "d_model", "heads", "d_ff", "seq_len"};
  for (int i = 0; i < 5; ++i) {
    StatusOr<int> v = MetadataInt(md, keys[i]);
    if (!v.ok()) return fail(v.status());
    *fields[i] = *v;
  }
  if (auto it = md.find("mix_post_fraction"); it != md.end()) {
    char* end = nullptr;
    c.model.mix_post_fraction = std::strtod(it->second.c_str(), &end);
    if (it->second.empty() || end == nullptr || *end != '\0') {
      return fail(DataLoss("metadata 'mix_post_fraction' is not a number: '" + it->second + "'"));
    }
  }
  if (auto it = md.find("qk_norm"); it != md.end()) {
    if (it->second != "true" && it->second != "false") {
      return fail(DataLoss("metadata 'qk_norm' is not true or false: '" + it->second + "'"));
    }
    c.model.qk_norm = it->second == "true";
  }
  if (auto it = md.find("norm"); it != md.end()) {
    auto norm = ParseNorm(it->second);
    if (!norm.ok()) return fail(DataLoss(norm.status().message()));
    c.model.norm = *norm;
  }
  c.model.dropout = 0.0f;
  Status valid = ValidateModelConfig(c.model);
  if (!valid.ok()) return fail(DataLoss("metadata describes an invalid model: " + valid.message()));
  if (md.count("step")) {
    StatusOr<int> step = MetadataInt(md, "step");
    if (!step.ok()) return fail(step.status());
    c.step = *step;
  }

  const ParamLayout layout = ParamLayout::ForModel(c.model);
  c.params.assign(layout.total(), 0.0f);
  size_t expected_tensors = layout.tensors().size();
  for (const TensorSpec& t : layout.tensors()) {
    Status s = CopyTensor(*file, t.name, t, c.params.data() + t.offset);
    if (!s.ok()) return fail(s);
  }
  c.has_optimizer_state = file->tensors.count(kMomentPrefixM + layout.tensors().front().name) > 0;
  if (c.has_optimizer_state) {
    c.m.assign(layout.total(), 0.0f);
    c.v.assign(layout.total(), 0.0f);
    for (const TensorSpec& t : layout.tensors()) {
      Status s = CopyTensor(*file, kMomentPrefixM + t.name, t, c.m.data() + t.offset);
      if (s.ok()) s = CopyTensor(*file, kMomentPrefixV + t.name, t, c.v.data() + t.offset);
      if (!s.ok()) return fail(s);
    }
    expected_tensors *= 3;
  }
  if (file->tensors.size() != expected_tensors) {
    for (const auto& [name, t] : file->tensors) {
      const std::string base = name.rfind(kMomentPrefixM, 0) == 0 || name.rfind(kMomentPrefixV, 0) == 0
                                   ? name.substr(sizeof(kMomentPrefixM) - 1)
                                   : name;
      if (layout.Find(base) == nullptr) {
        return fail(DataLoss("unexpected tensor '" + name + "' for a " + std::string(PlacementName(c.model.placement)) +
                             " model with " + std::to_string(c.model.layers) + " layers" +
                             (c.model.qk_norm ? ", qk_norm" : "") + ", " + NormName(c.model.norm)));
      }
    }
    return fail(DataLoss("optimizer state is incomplete"));
  }
  return c;
}

}  // namespace normsweep::trainer

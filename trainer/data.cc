#include "trainer/data.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>

#include "trainer/rng.h"

namespace normsweep::trainer {
namespace {

constexpr uint64_t kTrainStream = 0x7a11;
constexpr uint64_t kValidationSeed = 0x5eed0fda7aULL;

Batch EmptyBatch(int batch_size, int seq_len) {
  Batch b;
  b.batch_size = batch_size;
  b.seq_len = seq_len;
  b.inputs.assign(static_cast<size_t>(batch_size) * seq_len, 0);
  b.targets.assign(static_cast<size_t>(batch_size) * seq_len, -1);
  return b;
}

class TranslateTask final : public Dataset {
 public:
  static constexpr int kLetters = 16;
  static constexpr int kShift = 7;
  static constexpr int kValidationExamples = 4096;

  Batch TrainBatch(uint64_t seed, int step, int batch_size, int seq_len) const override {
    Batch b = EmptyBatch(batch_size, seq_len);
    for (int i = 0; i < batch_size; ++i) {
      Rng rng(MixSeed(seed, kTrainStream, (static_cast<uint64_t>(step) << 20) + i));
      Fill(rng, seq_len, &b, i);
    }
    return b;
  }

  Batch ValidationBatch(int index, int batch_size, int seq_len) const override {
    Batch b = EmptyBatch(batch_size, seq_len);
    for (int i = 0; i < batch_size; ++i) {
      Rng rng(MixSeed(kValidationSeed, static_cast<uint64_t>(index) * batch_size + i));
      Fill(rng, seq_len, &b, i);
    }
    return b;
  }

  int ValidationBatchCount(int batch_size, int) const override {
    return std::max(1, kValidationExamples / batch_size);
  }
  bool has_accuracy() const override { return true; }

 private:
  static void Fill(Rng& rng, int seq_len, Batch* b, int row) {
    const int max_n = std::max(1, (seq_len - 1) / 2);
    const int n = 1 + static_cast<int>(rng.Below(static_cast<uint64_t>(max_n)));
    std::vector<int32_t> w(static_cast<size_t>(seq_len) + 1, ' ');
    for (int i = 0; i < n; ++i) w[static_cast<size_t>(i)] = 'a' + static_cast<int>(rng.Below(kLetters));
    w[static_cast<size_t>(n)] = '=';
    for (int i = 0; i < n; ++i) {
      const int src = w[static_cast<size_t>(n - 1 - i)] - 'a';
      w[static_cast<size_t>(n + 1 + i)] = 'a' + (src + kShift) % kLetters;
    }
    if (2 * n + 1 <= seq_len) w[static_cast<size_t>(2 * n + 1)] = '.';
    int32_t* in = b->inputs.data() + static_cast<size_t>(row) * seq_len;
    int32_t* tg = b->targets.data() + static_cast<size_t>(row) * seq_len;
    for (int t = 0; t < seq_len; ++t) {
      in[t] = w[static_cast<size_t>(t)];
      // Position t predicts w[t+1]: count it when w[t+1] is part of tgt or the final '.'.
      tg[t] = (t >= n && t <= 2 * n) ? w[static_cast<size_t>(t) + 1] : -1;
    }
  }
};

class TextCorpus final : public Dataset {
 public:
  explicit TextCorpus(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {
    split_ = bytes_.size() - bytes_.size() / 10;
  }

  size_t train_size() const { return split_; }
  size_t validation_size() const { return bytes_.size() - split_; }

  Batch TrainBatch(uint64_t seed, int step, int batch_size, int seq_len) const override {
    Batch b = EmptyBatch(batch_size, seq_len);
    Rng rng(MixSeed(seed, kTrainStream, static_cast<uint64_t>(step)));
    const uint64_t starts = split_ - static_cast<size_t>(seq_len);  // window needs seq_len+1 bytes
    for (int i = 0; i < batch_size; ++i) {
      const size_t off = static_cast<size_t>(rng.Below(starts));
      for (int t = 0; t < seq_len; ++t) {
        b.inputs[static_cast<size_t>(i) * seq_len + t] = bytes_[off + t];
        b.targets[static_cast<size_t>(i) * seq_len + t] = bytes_[off + t + 1];
      }
    }
    return b;
  }

  // The last batch may hold fewer windows than batch_size.
  Batch ValidationBatch(int index, int batch_size, int seq_len) const override {
    const int64_t windows = WindowCount(split_, bytes_.size(), seq_len);
    const int64_t first = static_cast<int64_t>(index) * batch_size;
    const int count = static_cast<int>(std::min<int64_t>(batch_size, windows - first));
    return ConsecutiveWindows(bytes_, split_, static_cast<int>(first), count, seq_len);
  }

  int ValidationBatchCount(int batch_size, int seq_len) const override {
    const int64_t windows = WindowCount(split_, bytes_.size(), seq_len);
    return static_cast<int>(std::min<int64_t>((windows + batch_size - 1) / batch_size, 1 << 30));
  }
  bool has_accuracy() const override { return false; }

 private:
  std::vector<uint8_t> bytes_;
  size_t split_ = 0;
};

}  // namespace

StatusOr<std::vector<uint8_t>> ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open '" + path + "'");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return DataLoss("error reading '" + path + "'");
  return bytes;
}

int64_t WindowCount(size_t begin, size_t end, int seq_len) {
  if (end <= begin) return 0;
  return static_cast<int64_t>((end - begin) / (static_cast<size_t>(seq_len) + 1));
}

double UnigramLoss(const Dataset& data, int batch_size, int seq_len, int eval_batches) {
  std::vector<double> count(kVocabSize, 1.0);  // add-one
  double total = kVocabSize;
  for (int step = 1; step <= kUnigramBatches; ++step) {
    const Batch b = data.TrainBatch(0, step, batch_size, seq_len);
    for (int32_t t : b.targets) {
      if (t < 0 || t >= kVocabSize) continue;
      count[t] += 1;
      total += 1;
    }
  }
  double loss = 0;
  int64_t n = 0;
  const int batches = std::min(eval_batches, data.ValidationBatchCount(batch_size, seq_len));
  for (int i = 0; i < batches; ++i) {
    const Batch b = data.ValidationBatch(i, batch_size, seq_len);
    for (int32_t t : b.targets) {
      if (t < 0 || t >= kVocabSize) continue;
      loss -= std::log(count[t] / total);
      ++n;
    }
  }
  return n > 0 ? loss / static_cast<double>(n) : std::nan("");
}

Batch ConsecutiveWindows(const std::vector<uint8_t>& bytes, size_t begin, int first, int count, int seq_len) {
  Batch b = EmptyBatch(count, seq_len);
  for (int i = 0; i < count; ++i) {
    const size_t off = begin + static_cast<size_t>(first + i) * (static_cast<size_t>(seq_len) + 1);
    for (int t = 0; t < seq_len; ++t) {
      b.inputs[static_cast<size_t>(i) * seq_len + t] = bytes[off + t];
      b.targets[static_cast<size_t>(i) * seq_len + t] = bytes[off + t + 1];
    }
  }
  return b;
}

StatusOr<std::unique_ptr<Dataset>> MakeDataset(const DataConfig& data, int seq_len, int batch_size) {
  if (data.data_file.empty()) {
    if (data.task == "translate") return std::unique_ptr<Dataset>(new TranslateTask());
    return InvalidArgument("task: unknown task '" + data.task + "' (expected translate, or set data_file)");
  }
  StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(data.data_file);
  if (!bytes.ok()) return InvalidArgument("data_file: " + bytes.status().message());
  auto corpus = std::make_unique<TextCorpus>(std::move(*bytes));
  if (corpus->train_size() < static_cast<size_t>(seq_len) + 2 ||
      corpus->ValidationBatchCount(batch_size, seq_len) < 1) {
    return InvalidArgument("data_file: '" + data.data_file + "' is too small: it needs at least " +
                           std::to_string(10 * (seq_len + 1)) + " bytes, so that its last 10% (the validation "
                           "part) holds one window of seq_len+1 = " + std::to_string(seq_len + 1) + " bytes");
  }
  return std::unique_ptr<Dataset>(std::move(corpus));
}

}  // namespace normsweep::trainer

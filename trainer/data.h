// Training data: deterministic batches from a seed, nothing downloaded.
//
//  * "translate": a toy translation task that needs attention. A window is
//    src '=' tgt '.' then spaces, where src is n random letters a-p
//    (1 <= n <= (seq_len-1)/2) and tgt is src reversed with every letter
//    shifted by 7 (a->h, ..., p->g, modulo the 16 letters). The loss (and the
//    accuracy) count only the predictions of tgt and the final '.'.
//  * a text file, byte-level: the first 90% of the bytes train, the last 10%
//    validate. Training windows start at random offsets; validation windows
//    are the consecutive non-overlapping windows of seq_len+1 bytes from the
//    start of the validation part.
//
// A training batch depends only on (seed, step), so a resumed run sees the
// same batches. Validation batches do not depend on the seed, so runs with
// different seeds are scored on the same data.
#ifndef NORMSWEEP_TRAINER_DATA_H_
#define NORMSWEEP_TRAINER_DATA_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trainer/backend.h"
#include "trainer/settings/config.h"
#include "trainer/settings/status.h"

namespace normsweep::trainer {

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual Batch TrainBatch(uint64_t seed, int step, int batch_size, int seq_len) const = 0;
  // Validation batch `index` (0-based) of at most batch_size windows.
  virtual Batch ValidationBatch(int index, int batch_size, int seq_len) const = 0;
  // How many validation batches exist (the evaluation uses min(this, eval_batches)).
  virtual int ValidationBatchCount(int batch_size, int seq_len) const = 0;
  virtual bool has_accuracy() const = 0;
};

// Loads the dataset a run asks for (data_file, else task). Fails with an
// error naming data_file when the file is missing or too small for seq_len.
StatusOr<std::unique_ptr<Dataset>> MakeDataset(const DataConfig& data, int seq_len, int batch_size);

// The unigram loss: the mean cross-entropy, over the targets of validation
// batches 0 .. eval_batches-1 (those Evaluate scores), of the token
// frequencies counted over the targets of training batches 1 ..
// kUnigramBatches of seed 0, add-one smoothed over the kVocabSize tokens.
// It depends on the data and the shapes only, not on the run's seed, so
// every trial of a sweep on the same data reports the same figure.
inline constexpr int kUnigramBatches = 256;
double UnigramLoss(const Dataset& data, int batch_size, int seq_len, int eval_batches);

// Reads a whole file as bytes.
StatusOr<std::vector<uint8_t>> ReadFileBytes(const std::string& path);

// Windows w = first, ..., first+count-1 of seq_len+1 consecutive bytes,
// non-overlapping from the start of bytes: inputs the first seq_len bytes of
// a window, targets the last seq_len. The caller checks they exist.
Batch ConsecutiveWindows(const std::vector<uint8_t>& bytes, size_t begin, int first, int count, int seq_len);
// How many such windows fit in bytes[begin, end).
int64_t WindowCount(size_t begin, size_t end, int seq_len);

}  // namespace normsweep::trainer

#endif  // NORMSWEEP_TRAINER_DATA_H_

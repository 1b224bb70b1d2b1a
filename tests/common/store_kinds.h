// One suite, two stores: a test suite derived from BothStoresTest runs every
// test against a MemoryStore and against a PostgresStore on a fresh
// database (fresh_database.h), e.g.
//   INSTANTIATE_TEST_SUITE_P(Stores, MyTest, testing::BothStores(), testing::StoreKindName);
#ifndef NORMSWEEP_TESTS_COMMON_STORE_KINDS_H_
#define NORMSWEEP_TESTS_COMMON_STORE_KINDS_H_

#include <memory>
#include <string>

#include "db/store.h"
#include "gtest/gtest.h"

namespace normsweep::testing {

enum class StoreKind { kMemory, kPostgres };

inline auto BothStores() { return ::testing::Values(StoreKind::kMemory, StoreKind::kPostgres); }

// "Memory" or "Postgres": the parameter's part of the test's name.
std::string StoreKindName(const ::testing::TestParamInfo<StoreKind>& info);

class BothStoresTest : public ::testing::TestWithParam<StoreKind> {
 protected:
  void SetUp() override;

  // Another PostgresStore on the test's database (kPostgres only), as a
  // second scheduler replica has it.
  std::unique_ptr<db::Store> OpenAnother();

  std::string conninfo_;  // kPostgres only
  std::unique_ptr<db::Store> store_;
};

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_COMMON_STORE_KINDS_H_

#include "tests/common/store_kinds.h"

#include "db/memory_store.h"
#include "tests/common/fresh_database.h"

namespace normsweep::testing {

std::string StoreKindName(const ::testing::TestParamInfo<StoreKind>& info) {
  return info.param == StoreKind::kMemory ? "Memory" : "Postgres";
}

void BothStoresTest::SetUp() {
  if (GetParam() == StoreKind::kMemory) {
    store_ = std::make_unique<db::MemoryStore>();
    return;
  }
  auto conninfo = FreshDatabase();
  ASSERT_TRUE(conninfo.ok()) << conninfo.status();
  conninfo_ = *conninfo;
  store_ = OpenAnother();
  ASSERT_NE(store_, nullptr);
}

std::unique_ptr<db::Store> BothStoresTest::OpenAnother() {
  auto store = OpenStore(conninfo_);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

}  // namespace normsweep::testing

// KeyStore: a Module's parameters seen as keys without copies, and declared keys
// checked by name.
#include "paddle_like/client/key_store.h"

#include <gtest/gtest.h>

#include "tests/client/two_pservers.h"

namespace pl {
namespace {

TEST(KeyStoreTest, AModulesParametersAreItsKeysInPlace) {
  TinyModel model;
  std::unique_ptr<KeyStore> keys = KeyStore::Of(model);
  ASSERT_EQ(keys->keys().size(), 3u);
  EXPECT_EQ(keys->keys()[0].name, "emb.table");
  StatusOr<Parameter*> w = keys->Find("fc.w");
  ASSERT_TRUE(w.ok());
  // The same tensor: a pull into the key is a pull into the model.
  EXPECT_EQ((*w)->var.value().f32(), model.fc->weight().value().f32());
  StatusOr<Parameter*> missing = keys->Find("fc.weight");
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_NE(missing.status().message().find("known: emb.table, fc.w, fc.b"), std::string::npos) << missing.status();
}

TEST(KeyStoreTest, DeclaredKeysHoldTheirShapesAndRefuseBadSpecs) {
  StatusOr<std::unique_ptr<KeyStore>> keys =
      KeyStore::Declare({KeySpec::Dense("w", {3, 4}), KeySpec::Sparse("emb", 8, 1000, InitSpec::Normal(0.1f))});
  ASSERT_TRUE(keys.ok()) << keys.status();
  StatusOr<Parameter*> w = (*keys)->Find("w");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ((*w)->var.shape(), (Shape{3, 4}));
  StatusOr<Parameter*> emb = (*keys)->Find("emb");
  ASSERT_TRUE(emb.ok());
  EXPECT_EQ((*emb)->table->dim(), 8);
  EXPECT_EQ((*emb)->table->num_rows(), 1000);

  EXPECT_NE(KeyStore::Declare({KeySpec::Dense("w", {3, 0})}).status().message().find("shape [3, 0]"),
            std::string::npos);
  EXPECT_NE(KeyStore::Declare({KeySpec::Sparse("e", 0)}).status().message().find("'e' has dim 0"), std::string::npos);
  EXPECT_NE(KeyStore::Declare({KeySpec::Dense("w", {1}), KeySpec::Sparse("w", 2)}).status().message().find(
                "declared twice"),
            std::string::npos);
  EXPECT_FALSE(KeyStore::Declare({}).ok());
}

}  // namespace
}  // namespace pl

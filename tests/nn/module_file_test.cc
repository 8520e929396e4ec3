// A module's parameters through a safetensors file: dense and sparse round trips, and a
// mismatched file that changes nothing; buffers saved and loaded with them.
#include "paddle_like/nn/module_file.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "paddle_like/io/safetensors.h"
#include "paddle_like/nn/embedding.h"
#include "paddle_like/nn/linear.h"
#include "paddle_like/nn/normalization.h"
#include "tests/testing/scratch_dir.h"

namespace pl {
namespace {

using testing::ScratchDir;

std::shared_ptr<Sequential> Mlp() {
  auto m = std::make_shared<Sequential>();
  m->Add("fc1", std::make_shared<Linear>(4, 3)).Add("fc2", std::make_shared<Linear>(3, 2));
  return m;
}

TEST(ModuleFileTest, RoundTrip) {
  ScratchDir dir;
  const std::string path = dir.File("m.safetensors");
  auto a = Mlp();
  a->InitParameters(1);
  ASSERT_TRUE(SaveModule(path, *a).ok());
  auto b = Mlp();
  b->InitParameters(2);
  ASSERT_NE(b->NamedParameters()[0].param->var.value().f32()[0],
            a->NamedParameters()[0].param->var.value().f32()[0]);
  ASSERT_TRUE(LoadModule(path, *b).ok());
  auto pa = a->NamedParameters(), pb = b->NamedParameters();
  ASSERT_EQ(pa.size(), 4u);
  for (size_t i = 0; i < pa.size(); ++i) {
    const Tensor& x = pa[i].param->var.value();
    const Tensor& y = pb[i].param->var.value();
    ASSERT_EQ(x.shape(), y.shape());
    EXPECT_EQ(std::memcmp(x.raw_data(), y.raw_data(), x.bytes()), 0) << pa[i].name;
  }
  auto f = LoadTensors(path);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->order, std::vector<std::string>({"fc1.w", "fc1.b", "fc2.w", "fc2.b"}));
}

TEST(ModuleFileTest, ShapeMismatchNamesBothShapesAndChangesNothing) {
  ScratchDir dir;
  const std::string path = dir.File("m.safetensors");
  auto other = std::make_shared<Sequential>();
  other->Add("fc1", std::make_shared<Linear>(4, 3)).Add("fc2", std::make_shared<Linear>(3, 5));
  other->InitParameters(1);
  ASSERT_TRUE(SaveModule(path, *other).ok());

  auto m = Mlp();
  m->InitParameters(2);
  const Tensor before = m->NamedParameters()[0].param->var.value().Clone();
  Status s = LoadModule(path, *m);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("fc2.w"), std::string::npos) << s;
  EXPECT_NE(s.message().find("[3, 2]"), std::string::npos) << s;
  EXPECT_NE(s.message().find("[3, 5]"), std::string::npos) << s;
  // fc1 matched, yet nothing was loaded because fc2 did not.
  const Tensor& after = m->NamedParameters()[0].param->var.value();
  EXPECT_EQ(std::memcmp(before.raw_data(), after.raw_data(), before.bytes()), 0);

  // A missing parameter is NOT_FOUND naming it.
  ASSERT_TRUE(SaveTensors(path, {{"fc1.w", Tensor::Zeros({4, 3})}}).ok());
  Status missing = LoadModule(path, *m);
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("fc2.b"), std::string::npos);
}

TEST(ModuleFileTest, SparseTableRowsRoundTrip) {
  ScratchDir dir;
  const std::string path = dir.File("e.safetensors");
  Embedding a(100, 4);
  a.InitParameters(3);
  for (int64_t id : {42, 7, 99}) a.table()->Row(id);
  ASSERT_TRUE(SaveModule(path, a).ok());
  auto f = LoadTensors(path);
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string name = a.NamedParameters()[0].name;
  EXPECT_EQ(f->tensors.at(name).shape(), Shape({3, 4}));
  EXPECT_EQ(f->tensors.at(name + ".ids").i64()[0], 7);  // sorted by id

  Embedding b(100, 4);
  b.InitParameters(9);
  b.table()->Row(1);
  ASSERT_TRUE(LoadModule(path, b).ok());
  EXPECT_EQ(b.table()->rows().size(), 3u);
  EXPECT_FALSE(b.table()->rows().Contains(1));
  for (int64_t id : {42, 7, 99}) {
    EXPECT_EQ(std::memcmp(b.table()->rows().Find(id), a.table()->rows().Find(id), 16), 0) << id;
  }
  // Rows outside a smaller table are refused before anything changes.
  Embedding small(50, 4);
  small.InitParameters(9);
  small.table()->Row(1);
  Status s = LoadModule(path, small);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(small.table()->rows().Contains(1));
}

TEST(ModuleFileTest, BuffersRoundTripAndAMissingBufferIsNamed) {
  ScratchDir dir;
  const std::string path = dir.File("bn.safetensors");
  auto net = [] {
    auto m = std::make_shared<Sequential>();
    m->Add("fc", std::make_shared<Linear>(2, 2)).Add("bn", std::make_shared<BatchNorm>(2));
    return m;
  };
  auto a = net();
  a->NamedBuffers()[0].second.f32()[1] = 5.0f;  // bn.running_mean
  a->NamedBuffers()[1].second.f32()[0] = 3.0f;  // bn.running_var
  ASSERT_TRUE(SaveModule(path, *a).ok());
  auto f = LoadTensors(path);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->order, std::vector<std::string>({"fc.w", "fc.b", "bn.weight", "bn.bias",
                                                "bn.running_mean", "bn.running_var"}));
  auto b = net();
  const Tensor view = b->NamedBuffers()[0].second;  // a view taken before loading
  ASSERT_TRUE(LoadModule(path, *b).ok());
  EXPECT_EQ(view.f32()[1], 5.0f);
  EXPECT_EQ(b->NamedBuffers()[1].second.f32()[0], 3.0f);

  // A file of the parameters only: the buffers are NOT_FOUND, and nothing changes.
  std::vector<std::pair<std::string, Tensor>> params_only;
  for (const auto& name : {"fc.w", "fc.b", "bn.weight", "bn.bias"}) params_only.emplace_back(name, f->tensors.at(name));
  ASSERT_TRUE(SaveTensors(path, params_only).ok());
  auto c = net();
  Status s = LoadModule(path, *c);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("buffer 'bn.running_mean' is missing"), std::string::npos) << s;
  // Under kKeep (load_state_dict(strict=False)) they keep their values.
  EXPECT_TRUE(LoadModuleTensors(LoadTensors(path)->tensors, *c, "test", MissingParameters::kKeep).ok());
  EXPECT_EQ(c->NamedBuffers()[1].second.f32()[0], 1.0f);
  // A wrong buffer shape names both shapes.
  f->tensors["bn.running_var"] = Tensor::Zeros({3});
  Status bad = LoadModuleTensors(f->tensors, *c, "test");
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("buffer 'bn.running_var': the module has [2]"), std::string::npos) << bad;
}

}  // namespace
}  // namespace pl

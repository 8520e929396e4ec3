// An outside program built against an installed paddle_like: fits y = 3x - 1 with a
// Linear layer, Adam on a cosine schedule and the mean squared error, then saves and
// reloads the model as safetensors. Exits 0 when the fit is close and the reloaded
// model predicts the same; prints why not otherwise.
#include <cmath>
#include <cstdio>
#include <string>

#include "paddle_like/core/variable.h"
#include "paddle_like/nn/functional.h"
#include "paddle_like/nn/linear.h"
#include "paddle_like/nn/module_file.h"
#include "paddle_like/optim/lr_schedule.h"
#include "paddle_like/optim/optimizer.h"

int main(int argc, char** argv) {
  const std::string file = argc > 1 ? argv[1] : "fit_a_line.safetensors";
  pl::Linear model(1, 1);
  model.InitParameters(7);
  pl::OptimizerSpec spec{pl::OptimizerKind::kAdam, 0.1f};
  pl::LrSchedule cosine;
  cosine.kind = pl::LrSchedule::Kind::kCosine;
  cosine.t_max = 400;
  cosine.eta_min_factor = 0.01;
  if (auto s = pl::EncodeLrSchedule(cosine, &spec); !s.ok()) return std::printf("schedule: %s\n", s.ToString().c_str()), 1;
  auto opt = pl::Optimizer::Create(&model, spec);
  if (!opt.ok()) return std::printf("optimizer: %s\n", opt.status().ToString().c_str()), 1;
  pl::Tensor x({16, 1}, pl::DType::kFloat32), y({16, 1}, pl::DType::kFloat32);
  for (int i = 0; i < 16; ++i) {
    x.f32()[i] = -1.0f + i / 8.0f;
    y.f32()[i] = 3.0f * x.f32()[i] - 1.0f;
  }
  double loss_value = 0;
  for (int step = 0; step < 400; ++step) {
    auto out = model.Forward(pl::Variable(x, false));
    if (!out.ok()) return std::printf("forward: %s\n", out.status().ToString().c_str()), 1;
    auto diff = pl::functional::Add(*out, pl::Variable(y, false), -1.0f);
    auto sq = pl::functional::Mul(*diff, *diff);
    auto loss = pl::functional::Mean(*sq);
    loss_value = loss->value().f32()[0];
    if (auto s = loss->Backward(); !s.ok()) return std::printf("backward: %s\n", s.ToString().c_str()), 1;
    if (auto s = (*opt)->Step(); !s.ok()) return std::printf("step: %s\n", s.ToString().c_str()), 1;
  }
  const float w = model.weight().value().f32()[0], b = model.bias().value().f32()[0];
  std::printf("w=%.4f b=%.4f loss=%.6f\n", w, b, loss_value);
  if (std::abs(w - 3.0f) > 0.01f || std::abs(b + 1.0f) > 0.01f) return std::printf("did not fit\n"), 1;
  if (auto s = pl::SaveModule(file, model); !s.ok()) return std::printf("save: %s\n", s.ToString().c_str()), 1;
  pl::Linear reloaded(1, 1);
  if (auto s = pl::LoadModule(file, reloaded); !s.ok()) return std::printf("load: %s\n", s.ToString().c_str()), 1;
  if (reloaded.weight().value().f32()[0] != w) return std::printf("reloaded weight differs\n"), 1;
  std::printf("ok\n");
  return 0;
}

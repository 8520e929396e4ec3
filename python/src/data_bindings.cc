#include "python/src/data_bindings.h"

#include <sys/stat.h>

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "absl/strings/str_cat.h"
#include "paddle_like/data/record_file.h"
#include "proto/data.pb.h"
#include "python/src/bindings.h"
#include "python/src/numpy_bridge.h"
#include "python/src/status_bridge.h"

namespace pl::python {
namespace {

using namespace pybind11::literals;

py::object ViewOrNone(const Tensor& t) {
  if (!t.defined()) return py::none();
  return ArrayView(t);
}

template <typename T>
using CArray = py::array_t<T, py::array::c_style | py::array::forcecast>;

// Writes samples built by `fill(i, &sample)` for i in [0, n); GIL released.
template <typename Fill>
void WriteSamples(const std::string& path, int64_t n, int64_t records_per_chunk, Fill fill) {
  Status s;
  {
    py::gil_scoped_release release;
    RecordWriter writer;
    s = writer.Open(path, records_per_chunk);
    proto::Sample sample;
    std::string buf;
    for (int64_t i = 0; s.ok() && i < n; ++i) {
      sample.Clear();
      fill(i, &sample);
      sample.SerializeToString(&buf);
      s = writer.Write(buf);
    }
    if (s.ok()) s = writer.Close();
  }
  ThrowIfError(s);
}

}  // namespace

SampleLayout LayoutFromKind(const std::string& kind) {
  if (kind == "image") return SampleLayout::Image();
  if (kind == "clicks") return SampleLayout::Clicks();
  throw py::value_error("record kind must be 'image' or 'clicks', got '" + kind + "'");
}

py::dict ExamplesToDict(const Examples& e) {
  py::dict d;
  d["kind"] = e.layout.kind == SampleLayout::Kind::kImage ? "image" : "clicks";
  d["features"] = ViewOrNone(e.features);
  d["ids"] = ViewOrNone(e.ids);
  d["labels"] = ViewOrNone(e.labels);
  d["probabilities"] = ViewOrNone(e.probabilities);
  return d;
}

void RegisterData(py::module_& m) {
  m.def("load_records", [](const std::string& path, const std::string& kind) {
    const SampleLayout layout = LayoutFromKind(kind);
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      RaiseStatus(absl::NotFoundError(absl::StrCat("no such record file or directory: '", path, "'")));
    }
    StatusOr<Examples> e = absl::UnknownError("not run");
    {
      py::gil_scoped_release release;
      e = LoadRecordsFrom(path, layout);
    }
    return ExamplesToDict(ValueOrThrow(std::move(e)));
  }, "path"_a, "kind"_a);

  m.def("write_image_records", [](const std::string& path, CArray<uint8_t> images, CArray<int64_t> labels,
                                  int64_t records_per_chunk) {
    // images: uint8 (N, C, H, W); records store (H, W, C).
    if (images.ndim() != 4) throw py::value_error("images must be (N, C, H, W) uint8");
    const int64_t n = images.shape(0), c = images.shape(1), h = images.shape(2), w = images.shape(3);
    if (labels.ndim() != 1 || labels.shape(0) != n) {
      throw py::value_error(absl::StrCat("labels must be (", n, "), one per image"));
    }
    if (records_per_chunk < 1) throw py::value_error("records_per_chunk must be >= 1");
    const uint8_t* px = images.data();
    const int64_t* y = labels.data();
    WriteSamples(path, n, records_per_chunk, [&](int64_t i, proto::Sample* s) {
      std::string pixels(h * w * c, '\0');
      const uint8_t* img = px + i * c * h * w;
      for (int64_t ch = 0; ch < c; ++ch) {
        for (int64_t p = 0; p < h * w; ++p) pixels[p * c + ch] = static_cast<char>(img[ch * h * w + p]);
      }
      s->set_pixels(std::move(pixels));
      s->set_rows(static_cast<int32_t>(h));
      s->set_cols(static_cast<int32_t>(w));
      s->set_channels(static_cast<int32_t>(c));
      s->set_label(y[i]);
    });
  }, "path"_a, "images"_a, "labels"_a, "records_per_chunk"_a = 1000);

  m.def("write_click_records", [](const std::string& path, CArray<int64_t> ids, CArray<float> labels,
                                  py::object probabilities, int64_t records_per_chunk) {
    if (ids.ndim() != 2) throw py::value_error("ids must be (N, F) int64");
    const int64_t n = ids.shape(0), f = ids.shape(1);
    if (labels.ndim() != 1 || labels.shape(0) != n) {
      throw py::value_error(absl::StrCat("labels must be (", n, "), one per sample"));
    }
    // From a shape vector: pybind11 2.10's count constructors (array_t() and array_t(n))
    // give stride 0 under NumPy 2.
    CArray<float> probs(std::vector<py::ssize_t>{0});
    if (!probabilities.is_none()) {
      probs = probabilities.cast<CArray<float>>();
      if (probs.ndim() != 1 || probs.shape(0) != n) {
        throw py::value_error(absl::StrCat("probabilities must be (", n, ")"));
      }
    }
    if (records_per_chunk < 1) throw py::value_error("records_per_chunk must be >= 1");
    const int64_t* id = ids.data();
    const float* y = labels.data();
    const float* p = probabilities.is_none() ? nullptr : probs.data();
    WriteSamples(path, n, records_per_chunk, [&](int64_t i, proto::Sample* s) {
      for (int64_t k = 0; k < f; ++k) s->add_sparse_ids(id[i * f + k]);
      s->set_label(y[i] > 0.5f ? 1 : 0);
      if (p) s->set_probability(p[i]);
    });
  }, "path"_a, "ids"_a, "labels"_a, "probabilities"_a = py::none(), "records_per_chunk"_a = 1000);
}

}  // namespace pl::python

// HotRows: the most pushed rows of one stripe of a sparse table, with a bound on the
// memory whatever the table's size: the Space-Saving algorithm (Metwally et al.) over
// kSlots counters. An id pushed more than 1/kSlots of the stripe's row updates is
// always among them; a count may exceed the true one by at most `error` (the smallest
// count when the id took its slot). Rows are spread over the stripes by a hash, so a
// table's hottest rows are the hottest of its stripes' (ShardStore::Tables merges them).
//
// Thread-safety: none; its stripe's mutex guards it.
#ifndef PSERVER_STORE_HOT_ROWS_H_
#define PSERVER_STORE_HOT_ROWS_H_

#include <algorithm>
#include <array>
#include <cstdint>

namespace pl::pserver {

class HotRows {
 public:
  static constexpr int kSlots = 8;
  struct Entry {
    int64_t id = -1;
    int64_t count = 0;  // pushes of the row since it took the slot, + error
    int64_t error = 0;
  };

  // One push of row `id`: a scan of kSlots ids.
  void Count(int64_t id) {
    int min = 0;
    for (int i = 0; i < used_; ++i) {
      if (entries_[i].id == id) {
        ++entries_[i].count;
        return;
      }
      if (entries_[i].count < entries_[min].count) min = i;
    }
    if (used_ < kSlots) {
      entries_[used_++] = Entry{id, 1, 0};
      return;
    }
    Entry& e = entries_[min];  // the least counted row gives its slot up
    e = Entry{id, e.count + 1, e.count};
  }

  // The entries, in no order.
  template <typename Out>
  void AppendTo(Out* out) const {
    for (int i = 0; i < used_; ++i) out->push_back(entries_[i]);
  }

 private:
  std::array<Entry, kSlots> entries_;
  int used_ = 0;
};

}  // namespace pl::pserver

#endif  // PSERVER_STORE_HOT_ROWS_H_

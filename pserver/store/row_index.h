// RowIndex: a stripe's id -> slot index that stores only the slots. Each slot's id is
// kept beside its record (RowStripe::ids_in, 8 bytes a row), and the hash set of slots
// hashes and compares through it, so an entry costs a 4-byte slot and a control byte
// instead of a padded 16-byte (id, slot) pair: about 10 bytes a row at the map's usual
// load instead of 35, what brings a dim-8 Adam row near its raw bytes.
//
// Thread-safety: none of its own; RowStripe's mutex guards it (as it does ids_in, which
// the hash reads).
#ifndef PSERVER_STORE_ROW_INDEX_H_
#define PSERVER_STORE_ROW_INDEX_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"

namespace pl::pserver {

inline constexpr int kSlabShift = 12;
inline constexpr uint32_t kSlabPosMask = (1u << kSlabShift) - 1;

class RowIndex {
  using Ids = std::vector<std::unique_ptr<int64_t[]>>;
  struct IdKey {
    int64_t id;
  };
  static int64_t IdOf(const Ids& ids, uint32_t slot) {
    return ids[slot >> kSlabShift][slot & kSlabPosMask];
  }
  struct SlotHash {
    using is_transparent = void;
    const Ids* ids;
    size_t operator()(uint32_t slot) const { return absl::HashOf(IdOf(*ids, slot)); }
    size_t operator()(IdKey k) const { return absl::HashOf(k.id); }
  };
  struct SlotEq {
    using is_transparent = void;
    const Ids* ids;
    bool operator()(uint32_t a, uint32_t b) const { return a == b; }
    bool operator()(uint32_t slot, IdKey k) const { return IdOf(*ids, slot) == k.id; }
    bool operator()(IdKey k, uint32_t slot) const { return IdOf(*ids, slot) == k.id; }
  };
  using Set = absl::flat_hash_set<uint32_t, SlotHash, SlotEq>;

 public:
  // `ids`: per slab, the id of each slot's row (the stripe's ids_in); it outlives this.
  explicit RowIndex(const Ids* ids)
      : set_(0, SlotHash{ids}, SlotEq{ids}) {}
  RowIndex(const RowIndex&) = delete;
  RowIndex& operator=(const RowIndex&) = delete;

  std::optional<uint32_t> Find(int64_t id) const {
    auto it = set_.find(IdKey{id});
    if (it == set_.end()) return std::nullopt;
    return *it;
  }
  bool contains(int64_t id) const { return set_.contains(IdKey{id}); }
  // Adds `slot`, whose id the stripe has already written to ids_in.
  void Insert(uint32_t slot) { set_.insert(slot); }
  // Removes row `id`; returns its slot, or none.
  std::optional<uint32_t> Erase(int64_t id) {
    auto it = set_.find(IdKey{id});
    if (it == set_.end()) return std::nullopt;
    const uint32_t slot = *it;
    set_.erase(it);
    return slot;
  }
  size_t size() const { return set_.size(); }
  size_t capacity() const { return set_.capacity(); }
  // Bytes an entry takes in the set (the slot and its control byte).
  static constexpr size_t kEntryBytes = sizeof(uint32_t) + 1;

  // Iterates (id, slot) pairs, in no particular order.
  class const_iterator {
   public:
    std::pair<int64_t, uint32_t> operator*() const { return {IdOf(*ids_, *it_), *it_}; }
    const_iterator& operator++() {
      ++it_;
      return *this;
    }
    bool operator==(const const_iterator& o) const { return it_ == o.it_; }
    bool operator!=(const const_iterator& o) const { return it_ != o.it_; }

   private:
    friend class RowIndex;
    const_iterator(Set::const_iterator it, const Ids* ids) : it_(it), ids_(ids) {}
    Set::const_iterator it_;
    const Ids* ids_;
  };
  const_iterator begin() const { return const_iterator(set_.begin(), set_.hash_function().ids); }
  const_iterator end() const { return const_iterator(set_.end(), set_.hash_function().ids); }

 private:
  Set set_;
};

}  // namespace pl::pserver

#endif  // PSERVER_STORE_ROW_INDEX_H_

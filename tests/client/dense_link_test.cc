// DenseLink (paddle_like/dist/dense_link.h) between two ends on 127.0.0.1: the bytes
// of every range land in the same place at the peer, over every lane, both ways, with
// and without TLS; a peer that goes away or sends a frame outside the region breaks
// the link with an error instead of a hang or a write out of bounds.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <thread>

#include "paddle_like/dist/dense_link.h"
#include "paddle_like/rpc/bulk_socket.h"
#include "paddle_like/rpc/tls.h"
#include "tests/testing/process_tls.h"

namespace pl {
namespace {

constexpr size_t kPayload = 1 << 20;

// `count` connections from a dialer to a listener, each dialled after the one before
// was accepted, so that the two lists pair up in order.
void Connect(int count, const std::string& peer, rpc::BulkListener& listener, DenseLink::Lanes* dialled,
             DenseLink::Lanes* accepted) {
  for (int k = 0; k < count; ++k) {
    StatusOr<std::unique_ptr<rpc::BulkConnection>> d;
    std::thread dial([&] {
      d = rpc::BulkConnection::Dial("127.0.0.1", listener.port(), absl::Seconds(5), nullptr, peer);
      if (d.ok()) {
        ASSERT_TRUE((*d)->Write(listener.token().data(), listener.token().size(), absl::Seconds(5)).ok());
      }
    });
    StatusOr<std::unique_ptr<rpc::BulkConnection>> a = listener.Accept(absl::Now() + absl::Seconds(5));
    dial.join();
    ASSERT_TRUE(d.ok()) << d.status();
    ASSERT_TRUE(a.ok()) << a.status();
    dialled->push_back(*std::move(d));
    accepted->push_back(*std::move(a));
  }
}

struct Ends {
  std::shared_ptr<SharedRegion> ra, rb;
  std::unique_ptr<DenseLink> a, b;
};

// Two linked ends of `lanes` lanes each way.
void MakeEnds(int lanes, const std::string& peer, Ends* ends) {
  static std::atomic<bool> never{false};
  auto listener = rpc::BulkListener::Open("127.0.0.1", &never, peer);
  ASSERT_TRUE(listener.ok()) << listener.status();
  DenseLink::Lanes a_out, a_in, b_out, b_in;
  ASSERT_NO_FATAL_FAILURE(Connect(lanes, peer, **listener, &a_out, &b_in));
  ASSERT_NO_FATAL_FAILURE(Connect(lanes, peer, **listener, &b_out, &a_in));
  ends->ra = *SharedRegion::CreatePrivate(kPayload);
  ends->rb = *SharedRegion::CreatePrivate(kPayload);
  auto a = DenseLink::Start(std::move(a_out), std::move(a_in), ends->ra);
  auto b = DenseLink::Start(std::move(b_out), std::move(b_in), ends->rb);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ends->a = *std::move(a);
  ends->b = *std::move(b);
}

void Fill(SharedRegion& r, unsigned seed) {
  for (size_t i = 0; i < r.payload_bytes(); ++i) r.payload()[i] = static_cast<char>((i * 131 + seed) % 251);
}

// The ranges of `from` are in `to`, and nothing else of `to` changed from zero.
void ExpectCopied(const SharedRegion& from, const SharedRegion& to, const std::vector<DenseLink::Range>& ranges) {
  std::vector<char> want(to.payload_bytes(), 0);
  for (const auto& r : ranges) std::memcpy(want.data() + r.offset, from.payload() + r.offset, r.bytes);
  ASSERT_EQ(std::memcmp(want.data(), to.payload(), want.size()), 0);
}

// Ranges in no order, one across what a lane's share would be, one empty, one tiny.
const std::vector<DenseLink::Range> kRanges = {{700000, 5}, {0, 100}, {4096, 300000}, {500000, 0}, {999000, 1576}};

void SendBothWays(int lanes, const std::string& peer) {
  Ends e;
  ASSERT_NO_FATAL_FAILURE(MakeEnds(lanes, peer, &e));
  Fill(*e.ra, 1);
  ASSERT_TRUE(e.a->Send(1, kRanges).ok());
  ASSERT_TRUE(e.b->WaitFor(1, absl::Now() + absl::Seconds(10)).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectCopied(*e.ra, *e.rb, kRanges));
  // Back, under the same number (the other direction counts on its own).
  std::memset(e.ra->payload(), 0, kPayload);
  Fill(*e.rb, 7);
  const std::vector<DenseLink::Range> back = {{8, 800000}};
  ASSERT_TRUE(e.b->Send(1, back).ok());
  ASSERT_TRUE(e.a->WaitFor(1, absl::Now() + absl::Seconds(10)).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectCopied(*e.rb, *e.ra, back));
  // Many small sends in a row keep their order.
  for (uint64_t seq = 2; seq < 50; ++seq) {
    e.ra->payload()[seq] = static_cast<char>(seq);
    ASSERT_TRUE(e.a->Send(seq, {{static_cast<int64_t>(seq), 1}}).ok());
  }
  ASSERT_TRUE(e.b->WaitFor(49, absl::Now() + absl::Seconds(10)).ok());
  for (int seq = 2; seq < 50; ++seq) EXPECT_EQ(e.rb->payload()[seq], static_cast<char>(seq));
}

TEST(DenseLinkTest, RangesLandInPlaceOverEveryLaneBothWays) {
  SendBothWays(1, "");
  SendBothWays(3, "");
}

// A send in two halves: the peer has the bytes while the sender is between them (a
// caller makes its gRPC call there), and the link takes the next send after FinishSend.
TEST(DenseLinkTest, AStartedSendLandsBeforeItIsFinishedAndTheNextSendFollows) {
  Ends e;
  ASSERT_NO_FATAL_FAILURE(MakeEnds(2, "", &e));
  Fill(*e.ra, 3);
  ASSERT_TRUE(e.a->StartSend(1, kRanges).ok());
  ASSERT_TRUE(e.b->WaitFor(1, absl::Now() + absl::Seconds(10)).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectCopied(*e.ra, *e.rb, kRanges));
  ASSERT_TRUE(e.a->FinishSend().ok());
  ASSERT_TRUE(e.a->Send(2, {{0, 64}}).ok());
  ASSERT_TRUE(e.b->WaitFor(2, absl::Now() + absl::Seconds(10)).ok());
  // A bad range is refused by StartSend, with nothing to finish.
  EXPECT_TRUE(absl::IsInvalidArgument(e.a->StartSend(3, {{kPayload, 1}})));
  ASSERT_TRUE(e.a->Send(3, {{0, 64}}).ok());
}

// Several calls in flight each wait for their own send, whatever order the sends take
// (a pserver answers concurrent pulls in any order): a later number landing first does
// not stand for an earlier one, and an earlier one landing last is still found.
TEST(DenseLinkTest, SendsLandInAnyOrderAndEachIsWaitedForItself) {
  Ends e;
  ASSERT_NO_FATAL_FAILURE(MakeEnds(3, "", &e));
  Fill(*e.ra, 5);
  ASSERT_TRUE(e.a->Send(8, {{0, 4096}}).ok());
  ASSERT_TRUE(e.b->WaitFor(8, absl::Now() + absl::Seconds(10)).ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(e.b->WaitFor(7, absl::Now() + absl::Milliseconds(100))))
      << "send 7 counted as landed because 8 had";
  ASSERT_TRUE(e.a->Send(7, {{4096, 4096}}).ok());
  ASSERT_TRUE(e.b->WaitFor(7, absl::Now() + absl::Seconds(10)).ok());
  EXPECT_TRUE(e.b->WaitFor(8, absl::Now() + absl::Seconds(1)).ok()) << "a landed send is remembered";
  ASSERT_NO_FATAL_FAILURE(ExpectCopied(*e.ra, *e.rb, {{0, 8192}}));
}

TEST(DenseLinkTest, WaitingForASendNeverMadeTimesOutAndABadRangeIsRefused) {
  Ends e;
  ASSERT_NO_FATAL_FAILURE(MakeEnds(2, "", &e));
  EXPECT_TRUE(absl::IsDeadlineExceeded(e.b->WaitFor(1, absl::Now() + absl::Milliseconds(100))));
  const Status bad = e.a->Send(1, {{static_cast<int64_t>(kPayload) - 4, 8}});
  EXPECT_TRUE(absl::IsInvalidArgument(bad)) << bad;
  EXPECT_TRUE(e.a->status().ok());  // nothing was sent: the link goes on
  ASSERT_TRUE(e.a->Send(1, {{0, 64}}).ok());
  EXPECT_TRUE(e.b->WaitFor(1, absl::Now() + absl::Seconds(10)).ok());
}

TEST(DenseLinkTest, APeerThatGoesAwayBreaksTheLinkAtOnce) {
  Ends e;
  ASSERT_NO_FATAL_FAILURE(MakeEnds(2, "", &e));
  e.b.reset();
  const absl::Time start = absl::Now();
  const Status waited = e.a->WaitFor(1, absl::Now() + absl::Seconds(20));
  EXPECT_TRUE(absl::IsUnavailable(waited)) << waited;
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_FALSE(e.a->Send(1, {{0, 64}}).ok());
}

TEST(DenseLinkTest, AFrameOutsideTheRegionBreaksTheLinkAndWritesNothing) {
  static std::atomic<bool> never{false};
  auto listener = rpc::BulkListener::Open("127.0.0.1", &never, "");
  ASSERT_TRUE(listener.ok()) << listener.status();
  DenseLink::Lanes raw_out, in, out, raw_in;
  ASSERT_NO_FATAL_FAILURE(Connect(1, "", **listener, &raw_out, &in));
  ASSERT_NO_FATAL_FAILURE(Connect(1, "", **listener, &out, &raw_in));
  auto region = *SharedRegion::CreatePrivate(kPayload);
  auto link = DenseLink::Start(std::move(out), std::move(in), region);
  ASSERT_TRUE(link.ok()) << link.status();
  // seq 1, one range that starts inside and ends past the payload.
  const uint64_t frame[4] = {1, 1, kPayload - 8, 64};
  ASSERT_TRUE(raw_out[0]->Write(frame, sizeof(frame), absl::Seconds(5)).ok());
  const Status waited = (*link)->WaitFor(1, absl::Now() + absl::Seconds(10));
  EXPECT_TRUE(absl::IsDataLoss(waited)) << waited;
  EXPECT_NE(waited.message().find("outside the region"), std::string::npos) << waited;
}

using DenseLinkTls = ::pl::testing::ProcessTlsTest;  // this process is pserver-0 of a fresh job

// Each lane runs its own TLS session, read on one thread and written on another end's.
TEST_F(DenseLinkTls, RangesLandInPlaceOverTlsLanes) { SendBothWays(2, "pserver-0"); }

}  // namespace
}  // namespace pl

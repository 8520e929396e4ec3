// rpc::CheckStringLengths on the real request messages: names over 256 bytes and free
// text over 4096 are refused naming the field's path and both lengths, wherever they
// are nested; bytes fields (tensor values) are not strings and pass.
#include "paddle_like/rpc/request_limits.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "proto/master.pb.h"
#include "proto/pserver.pb.h"

namespace pl::rpc {
namespace {

using ::testing::HasSubstr;

TEST(RequestLimitsTest, ANestedNameOverItsLimitIsRefusedNamingItsPath) {
  proto::PushRequest push;
  push.add_dense()->set_param("fc1.w");
  push.add_dense()->set_param(std::string(kMaxNameBytes, 'x'));
  push.mutable_dense(0)->set_values(std::string(1 << 20, '\0'));  // bytes: a megabyte of values is fine
  EXPECT_TRUE(CheckStringLengths(push).ok());
  push.mutable_dense(1)->set_param(std::string(kMaxNameBytes + 1, 'x'));
  Status s = CheckStringLengths(push);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("request field 'dense[1].param' is 257 bytes, over its limit of 256"));
}

TEST(RequestLimitsTest, FreeTextHasTheLargerLimit) {
  proto::TaskFailedRequest failed;
  failed.set_reason(std::string(kMaxTextBytes, 'r'));
  EXPECT_TRUE(CheckStringLengths(failed).ok());
  failed.set_reason(std::string(kMaxTextBytes + 1, 'r'));
  EXPECT_THAT(CheckStringLengths(failed).message(), HasSubstr("'reason' is 4097 bytes, over its limit of 4096"));
  proto::RegisterTrainerRequest named;
  named.set_name(std::string(1 << 20, 'n'));  // the 1 MB trainer name of issue 40
  EXPECT_THAT(CheckStringLengths(named).message(), HasSubstr("'name' is 1048576 bytes"));
}

TEST(RequestLimitsTest, RepeatedStringsAndMessagesInsideMessagesAreChecked) {
  proto::InitRequest init;
  init.add_params()->set_name("emb");
  (*init.mutable_optimizer()->mutable_hyper_params())[std::string(400, 'h')] = 0.9f;  // a map's keys
  EXPECT_THAT(CheckStringLengths(init).message(), HasSubstr("'optimizer.hyper_params[0].key' is 400 bytes"));
  proto::PullRequest pull;
  pull.add_sparse()->set_table(std::string(300, 't'));
  EXPECT_THAT(CheckStringLengths(pull).message(), HasSubstr("'sparse[0].table' is 300 bytes"));
}

}  // namespace
}  // namespace pl::rpc

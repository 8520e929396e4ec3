// DialDenseLink: the asking side of a dense link (dense_link.h; proto/pserver.proto,
// Attach): once a pserver granted one, open its lanes, each presenting the tokens and
// its preamble (pserver/service/dense_link_listener.h reads them), wait for the pserver's byte
// on every lane, and start the link over this side's copy of the region. A trainer asks
// for one (param_client.h); so does a primary for its stream to a backup.
//
// Thread-safety: a function; it dials the lanes on threads of its own.
#ifndef PADDLE_LIKE_DIST_DENSE_LINK_DIAL_H_
#define PADDLE_LIKE_DIST_DENSE_LINK_DIAL_H_

#include <atomic>
#include <memory>
#include <string>

#include "paddle_like/core/status.h"
#include "paddle_like/dist/dense_link.h"
#include "paddle_like/dist/shared_region.h"
#include "proto/pserver.pb.h"

namespace pl {

// `address`: the pserver's gRPC address (its host is dialled); `peer`: the identity its
// certificate must name under TLS ("pserver-3"); `lanes`: what the request asked for.
// `cancel` (may be null; must outlive the link): once set, a blocked dial, send or
// receive of the link's lanes ends within rpc::kBulkCancelCheck.
StatusOr<std::unique_ptr<DenseLink>> DialDenseLink(const std::string& address, const proto::AttachResponse& granted,
                                                   int lanes, const std::string& peer,
                                                   std::shared_ptr<SharedRegion> region,
                                                   const std::atomic<bool>* cancel = nullptr);

}  // namespace pl

#endif  // PADDLE_LIKE_DIST_DENSE_LINK_DIAL_H_

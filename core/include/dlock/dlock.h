// The whole public API of dlock: #include "dlock/dlock.h".
#pragma once

#include "dlock/duration.h"
#include "dlock/error.h"
#include "dlock/lease.h"
#include "dlock/open.h"
#include "dlock/options.h"
#include "dlock/provider.h"
#include "dlock/uri.h"
#include "dlock/wait.h"

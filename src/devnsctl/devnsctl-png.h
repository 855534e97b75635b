/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>
#include <systemd/sd-bus.h>

/* devnsctl screenshot PERSONA FILE.png: the persona's frame from devnsd, written as a PNG. */
int cmd_screenshot(sd_bus *bus, const char *persona, const char *path);

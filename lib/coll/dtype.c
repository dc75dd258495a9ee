// SPDX-License-Identifier: MIT
/*
 * lib/coll/dtype.c: out-of-line conversions of lib/coll/dtype.h, for
 * callers outside the reduction loops and for the tests, which check them
 * against an independent reference for every narrow value.
 */
#include "coll/dtype.h"

float mlap2p_f16_to_f32(uint16_t h) { return m2p_f16_to_f32(h); }
uint16_t mlap2p_f32_to_f16(float x) { return m2p_f32_to_f16(x); }
float mlap2p_bf16_to_f32(uint16_t b) { return m2p_bf16_to_f32(b); }
uint16_t mlap2p_f32_to_bf16(float x) { return m2p_f32_to_bf16(x); }
float mlap2p_e4m3_to_f32(uint8_t b) { return m2p_e4m3_to_f32(b); }
uint8_t mlap2p_f32_to_e4m3(float x) { return m2p_f32_to_e4m3(x); }
float mlap2p_e5m2_to_f32(uint8_t b) { return m2p_e5m2_to_f32(b); }
uint8_t mlap2p_f32_to_e5m2(float x) { return m2p_f32_to_e5m2(x); }

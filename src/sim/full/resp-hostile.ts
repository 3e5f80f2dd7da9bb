export interface RespHostileConfig {
  /** Simulated ms between two hostile actions [min, max]. */
  gapMs: [number, number];
  /** The RESP server's maxClients in these seeds. */
  maxClients: number;
}

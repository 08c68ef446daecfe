// The shape every built-in preset has (one preset per file in this folder; index.ts lists them).
import type { HooksConfig, MappingConfig } from '../schema.js'

export interface PresetDefinition {
  name: string
  description: string
  /** the mapping the preset adds, in the same form a user writes under hooks.mappings */
  mapping(config: HooksConfig): MappingConfig
}

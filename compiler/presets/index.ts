// The registry of built-in presets; each preset lives in a file of its own with this shape.
import type { HooksConfig, MappingConfig } from '../schema.js'
import { gmailPreset } from './gmail.js'

export interface PresetDefinition {
  name: string
  description: string
  /** the mapping the preset adds, in the same form a user writes under hooks.mappings */
  mapping(config: HooksConfig): MappingConfig
}

export const presets: ReadonlyMap<string, PresetDefinition> = new Map([[gmailPreset.name, gmailPreset]])

-- The beam's menu for the simulated target: one direction per optimisation
-- of the catalogue (mk.services.sim.kernel.OPTS), each naming it as
-- "(sim: NAME)" so the simulated model can follow it.
local menu = {}
for _, o in ipairs(require("mk.services.sim.kernel").OPTS) do
  menu[#menu + 1] = o.text .. " (sim: " .. o.name .. ")"
end
return menu
